"""Strict fake of the ``maya.cmds`` commands the plug-in uses (see ../FACTS.md).

Every command takes exactly the flags listed in its signature (an unknown flag raises
``TypeError`` as Maya does); values are in UI units (``currentUnit``), times in UI frames.
Undoable commands put one entry on the undo queue, grouped by ``undoInfo`` chunks; commands
registered by a loaded plug-in are reached as ``cmds.<name>`` like in Maya.
"""

from __future__ import annotations

import functools
import importlib.util
import os
from pathlib import Path

import numpy as np

from maya._scene import (
    ANGLE_RAD,
    AXES,
    FLAT,
    GLOBAL,
    LINEAR,
    LINEAR_CM,
    STATE,
    STEP,
    TIME_NAMES,
    Curve,
    Layer,
    MayaError,
    Node,
    Scene,
)

_LINEAR = {f"{p}{a}" for p in ("translate", "rotatePivot", "rotatePivotTranslate", "scalePivot",
                                 "scalePivotTranslate") for a in AXES}
_ANGULAR = {f"{p}{a}" for p in ("rotate", "jointOrient", "rotateAxis") for a in AXES}
_COMPOUND = ("translate", "rotate", "jointOrient", "rotateAxis", "scale")
_CHANNELS = {f"{p}{a}" for p in ("translate", "rotate") for a in AXES}


def _command(undoable: bool = False):
    """Count the call; undoable commands record the scene as it was before them."""
    def decorate(function):
        @functools.wraps(function)
        def wrapper(*args, **kwargs):
            STATE.calls[f"cmds.{function.__name__}"] += 1
            before = STATE.scene.snapshot() if undoable else None
            result = function(*args, **kwargs)
            if undoable and not kwargs.get("query"):
                STATE.record(("snapshot", before))
                STATE.touch()
            return result
        return wrapper
    return decorate


def _to_internal(attr: str, value: float) -> float:
    if attr in _LINEAR:
        return float(value) * LINEAR_CM[STATE.scene.linear_unit]
    if attr in _ANGULAR:
        return float(value) * ANGLE_RAD[STATE.scene.angle_unit]
    return float(value)


def _to_ui(attr: str, value: float) -> float:
    return float(value) / _to_internal(attr, 1.0) if attr in _LINEAR | _ANGULAR else value


def _split(plug: str) -> tuple[str, str]:
    if "." not in plug:
        raise MayaError(f"No object matches name: {plug}")
    node, attr = plug.split(".", 1)
    if node not in STATE.scene.nodes:
        raise MayaError(f"No object matches name: {plug}")
    return node, attr


def _seconds(frame: float) -> float:
    return float(frame) / STATE.scene.fps


# ------------------------------------------------------------------------- units and time
@_command()
def currentUnit(query: bool = False, time=None, linear=None, angle=None,  # noqa: N802
                updateAnimation: bool = True) -> str | None:  # noqa: N803
    scene = STATE.scene
    if query:
        if time:
            return next(k for k, v in TIME_NAMES.items() if v == scene.time_unit)
        if linear:
            return scene.linear_unit
        if angle:
            return scene.angle_unit
        raise TypeError("currentUnit -query needs -time, -linear or -angle")
    if time is not None:
        if time not in TIME_NAMES:
            raise MayaError(f"Invalid time unit: {time}")
        old = scene.fps
        scene.time_unit = TIME_NAMES[time]
        if updateAnimation:  # keys stay on the same frame numbers
            for curve in scene.curves.values():
                curve.times = curve.times * old / scene.fps
    if linear is not None:
        scene.linear_unit = linear
    if angle is not None:
        scene.angle_unit = angle
    STATE.touch()
    return None


@_command()
def playbackOptions(query: bool = False, minTime=None, maxTime=None,  # noqa: N802, N803
                    animationStartTime=None, animationEndTime=None):  # noqa: N803
    scene = STATE.scene
    if query:
        if minTime or animationStartTime:
            return scene.playback[0]
        return scene.playback[1]
    first = minTime if minTime is not None else scene.playback[0]
    last = maxTime if maxTime is not None else scene.playback[1]
    scene.playback = (float(first), float(last))
    STATE.touch()
    return None


@_command()
def currentTime(time=None, query: bool = False, edit: bool = False,  # noqa: N802
                update: bool = True) -> float:
    if query:
        return STATE.scene.time
    STATE.scene.time = float(time)
    STATE.touch()
    return STATE.scene.time


@_command()
def about(batch: bool = False, version: bool = False, apiVersion: bool = False):  # noqa: N803
    if batch:
        return STATE.batch
    if version:
        return "2025"
    if apiVersion:
        return 20250000
    raise TypeError("about: give a flag")


# ------------------------------------------------------------------------- scene structure
@_command(undoable=True)
def file(path: str | None = None, newFile: bool = False, force: bool = False,  # noqa: A001, N803
         open: bool = False, rename: str | None = None, save: bool = False,  # noqa: A002
         type: str | None = None) -> str:  # noqa: A002
    if newFile:
        STATE.scene = Scene()
    elif open:
        if path not in STATE.saved:
            raise MayaError(f"File not found: {path}")
        STATE.scene = STATE.saved[path].snapshot()
        STATE.scene.curves = {k: v.copy() for k, v in STATE.scene.curves.items()}
        STATE.file_name = str(path)
    elif rename is not None:
        STATE.file_name = rename
    elif save:
        saved = STATE.scene.snapshot()
        saved.curves = {k: v.copy() for k, v in saved.curves.items()}
        STATE.saved[STATE.file_name] = saved
        Path(STATE.file_name).write_text(f"// fake {type} scene\n")
    else:
        raise TypeError("file: give -newFile, -open, -rename or -save")
    STATE.touch()
    return STATE.file_name


@_command()
def objExists(name: str) -> bool:  # noqa: N802
    return name in STATE.scene.nodes or name in STATE.scene.curves


@_command()
def listConnections(plug: str, source: bool = True, destination: bool = True,  # noqa: N802
                    type: str | None = None) -> list[str] | None:  # noqa: A002
    """The nodes on the source side of ``plug`` (the fake answers that form only): its
    animation curve, if one drives it; None when there is none (as Maya answers)."""
    if not source or destination or type != "animCurve":
        raise NotImplementedError("the fake answers listConnections plug -source true "
                                  "-destination false -type animCurve only")
    _split(plug)
    curve = STATE.scene.inputs.get(plug)
    return [curve] if curve in STATE.scene.curves else None


@_command()
def ls(*objects: str, type: str | None = None, selection: bool = False):  # noqa: A002
    names = list(STATE.scene.selection) if selection else list(STATE.scene.nodes)
    if type is not None:
        names = [n for n in names if STATE.scene.nodes[n].type == type]
    return names


@_command(undoable=True)
def select(*objects: str, clear: bool = False, replace: bool = True) -> None:
    for name in objects:
        if name not in STATE.scene.nodes:
            raise MayaError(f"No object matches name: {name}")
    STATE.scene.selection = [] if clear else list(objects)


@_command(undoable=True)
def joint(name: str | None = None, position=(0.0, 0.0, 0.0), relative: bool = False,
          absolute: bool = False) -> str:
    """A new joint, child of the selected joint (joint command docs)."""
    scene = STATE.scene
    name = name or f"joint{len(scene.nodes) + 1}"
    parent = next((n for n in scene.selection if scene.nodes[n].type == "joint"), None)
    attrs = {f"translate{a}": _to_internal(f"translate{a}", v) for a, v in zip(AXES, position,
                                                                               strict=True)}
    attrs.update({f"{p}{a}": 0.0 for p in ("rotate", "jointOrient", "rotateAxis")
                  for a in AXES})
    attrs["rotateOrder"] = 0
    scene.nodes[name] = Node(name, "joint", parent, attrs)
    scene.selection = [name]
    return name


@_command(undoable=True)
def parent(child: str, newParent: str | None = None, relative: bool = False,  # noqa: N803
           world: bool = False) -> list[str]:
    STATE.scene.nodes[child].parent = None if world else newParent
    return [child]


@_command(undoable=True)
def delete(*objects: str) -> None:
    scene = STATE.scene
    for name in objects:
        if name in scene.curves:  # an animation curve: what it drove keeps its value
            for plug in [p for p, source in scene.inputs.items() if source == name]:
                del scene.inputs[plug]
            del scene.curves[name]
            continue
        layer = next((la for la in scene.layers if la.name == name), None)
        if layer is None:
            raise MayaError(f"delete: this fake deletes animation layers and curves only, "
                            f"not {name}")
        for curve in layer.curves.values():
            scene.curves.pop(curve, None)
        # the layer's own plugs go with it (a curve that drove its weight stays: FACTS.md)
        scene.inputs.pop(f"{name}.weight", None)
        for plug in layer.plugs:
            scene.nodes.pop(f"{plug.replace('.', '_')}_{layer.name}", None)
        scene.layers.remove(layer)
        scene.nodes.pop(name, None)


# ------------------------------------------------------------------------- attributes
@_command()
def getAttr(plug: str, time=None, keyable: bool = False, lock: bool = False):  # noqa: N802
    node, attr = _split(plug)
    item = STATE.scene.nodes[node]
    if keyable:
        return attr not in item.nonkeyable
    if lock:
        return attr in item.locked
    seconds = STATE.scene.time / STATE.scene.fps if time is None else _seconds(time)
    if attr in _COMPOUND:
        return [tuple(getAttr(f"{plug}{a}", time=time) for a in AXES)]
    if attr == "worldMatrix[0]":
        return [float(v) for v in STATE.world_matrix_at(node, seconds).T.reshape(-1)]
    if attr in _CHANNELS:
        return _to_ui(attr, STATE.plug_value(plug, seconds))
    if attr in item.attrs:
        return _to_ui(attr, item.attrs[attr])
    raise MayaError(f"getAttr: no attribute {plug}")


@_command(undoable=True)
def setAttr(plug: str, *values, type: str | None = None, lock: bool | None = None,  # noqa: N802, A002
            keyable: bool | None = None) -> None:
    node, attr = _split(plug)
    item = STATE.scene.nodes[node]
    if lock is not None or keyable is not None:
        if lock is not None:
            (item.locked.add if lock else item.locked.discard)(attr)
        if keyable is not None:
            (item.nonkeyable.discard if keyable else item.nonkeyable.add)(attr)
        return
    if attr == "offsetParentMatrix":  # setAttr docs: -type "matrix" and its 16 values
        matrix = values[0] if len(values) == 1 else values
        if type != "matrix" or len(matrix) != 16:
            raise MayaError(f"setAttr: {plug} is a matrix: give 16 values and type='matrix'")
        item.attrs[attr] = tuple(float(v) for v in matrix)
        return
    if attr in _COMPOUND:
        if type != "double3" or len(values) != 3:
            raise MayaError(f"setAttr: {plug} is a double3: give three values and "
                            "type='double3'")
        for axis, value in zip(AXES, values, strict=True):
            setAttr(f"{plug}{axis}", value)
        return
    if len(values) != 1:
        raise MayaError(f"setAttr: {plug} takes one value")
    if attr in item.locked:
        raise MayaError(f"The attribute '{plug}' is locked or connected and cannot be modified.")
    if item.type == "animLayer":
        layer = next(la for la in STATE.scene.layers if la.name == node)
        if attr == "rotationAccumulationMode":
            layer.accumulation = int(values[0])
            return
    if f"{node}.{attr}" in STATE.scene.inputs:
        raise MayaError(f"The attribute '{plug}' is locked or connected and cannot be modified.")
    item.attrs[attr] = _to_internal(attr, values[0])


# ------------------------------------------------------------------------- keys and layers
def _curve_kind(attr: str) -> str:
    return "TL" if attr in _LINEAR else "TA" if attr in _ANGULAR else "TU"


@_command(undoable=True)
def setKeyframe(*objects: str, time=None, value=None, animLayer: str | None = None,  # noqa: N802, N803
                attribute: str | None = None, breakdown: bool = False,
                inTangentType: str | None = None,  # noqa: N803
                outTangentType: str | None = None) -> int:  # noqa: N803
    """Key plugs (``node.attr``, or nodes and ``attribute``) at ``time`` (UI frames; default
    the current time) with ``value`` (UI units; default the plug's current value). An animation
    layer's ``weight`` keys like any plug: its curve drives the layer's weight."""
    scene = STATE.scene
    frame = scene.time if time is None else float(time)
    seconds = _seconds(frame)
    for flag, given, allowed in (("inTangentType", inTangentType, IN_TANGENT_TYPES),
                                 ("outTangentType", outTangentType, OUT_TANGENT_TYPES)):
        if given is not None and given not in allowed:
            raise MayaError(f"setKeyframe: invalid -{flag} '{given}'")
    types = {"linear": LINEAR, "flat": FLAT, "step": STEP, "auto": 11, None: GLOBAL}
    for given in (inTangentType, outTangentType):
        if given not in types:
            raise NotImplementedError(f"the fake does not model '{given}' tangents")
    if attribute is not None:
        for name in objects:
            if "." in name or name not in scene.nodes:
                raise MayaError(f"No object matches name: {name}")
        objects = tuple(f"{name}.{attribute}" for name in objects)
    count = 0
    for plug in objects:
        node, attr = _split(plug)
        if attr in scene.nodes[node].locked:
            raise MayaError(f"The attribute '{plug}' is locked and cannot be keyed.")
        if scene.nodes[node].type == "animLayer":
            if attr != "weight":
                raise NotImplementedError(f"the fake keys a layer's weight only, not {attr}")
            if animLayer is not None or breakdown:
                raise NotImplementedError("the fake keys a layer's weight as a plain curve")
            name = scene.inputs.get(plug, f"{node}_weight")
            scene.inputs[plug] = name
            curve = scene.curves[name].copy() if name in scene.curves else Curve("TU")
            curve.set_keys([seconds], [float(_layer(node).weight if value is None else value)],
                           types[inTangentType], types[outTangentType], keep=True)
            scene.curves[name] = curve
            count += 1
            continue
        layer = next((la for la in scene.layers if la.name == animLayer), None)
        if animLayer is not None and layer is None:
            raise MayaError(f"setKeyframe: no animation layer {animLayer}")
        internal = (STATE.plug_value(plug, seconds) if value is None
                    else _to_internal(attr, value))
        if layer is not None and plug in layer.plugs:  # keys go on the layer's own curve
            name = layer.curves.get(plug, f"{node}_{attr}_{layer.name}_inputB")
            if not layer.override:  # additive: the layer holds the difference
                internal -= _below(plug, layer, seconds)
            layer.curves[plug] = name
        else:  # -animLayer is ignored when the plug is not in that layer (setKeyframe docs)
            if any(plug in la.plugs for la in scene.layers):
                raise NotImplementedError("keying a layered plug without its layer")
            name = scene.inputs.get(plug, f"{node}_{attr}")
            scene.inputs[plug] = name
        if name in scene.curves:
            curve = scene.curves[name].copy()
        else:  # a new curve: a rotate curve takes the New Curve Default preference
            curve = Curve(_curve_kind(attr))
            if attr in _ANGULAR:
                curve.interpolation = NEW_CURVE_ROTATION[int(STATE.option_vars.get(
                    "rotationInterpolationDefault", 1))]
        curve.set_keys([seconds], [internal], types[inTangentType], types[outTangentType],
                       keep=True)
        if breakdown:
            curve.breakdown[np.searchsorted(curve.times, seconds)] = True
        scene.curves[name] = curve
        count += 1
    return count


#: setKeyframe's documented tangent types (its -inTangentType takes no "step").
IN_TANGENT_TYPES = {"auto", "clamped", "fast", "flat", "linear", "plateau", "slow", "spline",
                    "stepnext"}
OUT_TANGENT_TYPES = IN_TANGENT_TYPES | {"step"}


#: The optionVar ``rotationInterpolationDefault`` (Preferences > Animation > Rotation
#: Interpolation, New Curve Default) → the curve's rotationInterpolation (FACTS.md).
NEW_CURVE_ROTATION = {1: "none", 2: "euler", 3: "quaternionSlerp", 4: "quaternionSquad",
                      5: "quaternion"}


@_command()
def optionVar(query: str | None = None, exists: str | None = None,  # noqa: N802
              intValue: tuple[str, int] | None = None, remove: str | None = None):  # noqa: N803
    """Preferences kept by name (optionVar docs): query, exists, intValue (set), remove."""
    variables = STATE.option_vars
    if query is not None:
        return variables.get(query, 0)
    if exists is not None:
        return exists in variables
    if intValue is not None:
        name, value = intValue
        variables[name] = int(value)
        return None
    if remove is not None:
        variables.pop(remove, None)
        return None
    raise TypeError("optionVar: give -query, -exists, -intValue or -remove")


def _below(plug: str, layer: Layer, seconds: float) -> float:
    """Composite of the plug from the layers under ``layer``."""
    scene = STATE.scene
    index = scene.layers.index(layer)
    saved = scene.layers
    scene.layers = saved[:index]
    try:
        return STATE.plug_value(plug, seconds)
    finally:
        scene.layers = saved


@_command(undoable=True)
def animLayer(name: str | None = None, override: bool | None = None,  # noqa: N802
              edit: bool = False, query: bool = False, attribute=None,
              findCurveForPlug: str | None = None, weight: float | None = None,  # noqa: N803
              mute: bool | None = None, root: bool = False, passthrough: bool | None = None):
    scene = STATE.scene
    if query:
        if root:
            return "BaseAnimation" if scene.layers else None
        layer = _layer(name)
        if findCurveForPlug is not None:  # the layer's curve exists once the plug is keyed
            curve = layer.curves.get(findCurveForPlug)
            return [curve] if curve else []
        if weight:
            return layer.weight
        if mute:
            return layer.mute
        raise TypeError("animLayer -query: give -findCurveForPlug, -weight, -mute or -root")
    if edit:
        layer = _layer(name)
        for plug in [attribute] if isinstance(attribute, str) else attribute or []:
            node, attr = _split(plug)
            if attr in scene.nodes[node].locked:
                raise MayaError(f"animLayer: {plug} is locked and cannot be added to {name}")
            if plug not in layer.plugs:  # the plug is now driven by the layer's blend node
                layer.plugs.append(plug)
                kind = "Rotation" if attr in _ANGULAR else "DL" if attr in _LINEAR else "DA"
                blend = f"{node}_{attr}_{layer.name}"
                scene.nodes[blend] = Node(blend, f"animBlendNodeAdditive{kind}")
        if weight is not None:
            layer.weight = float(weight)
        if mute is not None:
            layer.mute = bool(mute)
        if passthrough is not None:
            layer.passthrough = bool(passthrough)
        return None
    unique = name or f"AnimLayer{len(scene.layers) + 1}"
    if unique in scene.nodes:  # stricter than documented: see FACTS.md
        raise MayaError(f"animLayer: an object named '{unique}' already exists")
    scene.nodes.setdefault("BaseAnimation", Node("BaseAnimation", "animLayer"))
    scene.nodes[unique] = Node(unique, "animLayer")
    scene.layers.append(Layer(unique, bool(override),
                              passthrough=True if passthrough is None else bool(passthrough)))
    return unique


def _layer(name: str | None) -> Layer:
    for layer in STATE.scene.layers:
        if layer.name == name:
            return layer
    raise MayaError(f"animLayer: object '{name}' not found")


@_command()
def rotationInterpolation(*objects: str, query: bool = False, convert=None) -> list[str]:  # noqa: N802
    """Query: ``rotationInterpolation -q -convert curve`` → its mode, in a list. Only one
    curve per query is documented by use (the docs say a string; animx's test plug-in reads
    ``result[0]``), so a query of several curves raises here."""
    if query:
        if not convert:
            raise TypeError("rotationInterpolation: in query mode, -convert is needed")
        if len(objects) != 1:
            raise MayaError("rotationInterpolation: the fake answers a query of one curve only "
                            "(what Maya answers for several is not documented)")
        return [STATE.scene.curves[objects[0]].interpolation]
    for name in objects:
        STATE.scene.curves[name].interpolation = convert
    return []


# ------------------------------------------------------------------------- undo
@_command()
def undoInfo(openChunk: bool = False, closeChunk: bool = False,  # noqa: N802, N803
             chunkName: str | None = None, query: bool = False, state: bool | None = None,
             stateWithoutFlush: bool | None = None):  # noqa: N803
    if query:
        if state:
            return int(STATE.undo_on)
        raise TypeError("undoInfo -query: the fake answers -state only")
    if state is not None or stateWithoutFlush is not None:
        on = bool(state if state is not None else stateWithoutFlush)
        if state is not None and not on:  # -state off flushes the queue
            STATE.undo_queue.clear()
        STATE.undo_on = on
        return None
    if openChunk:
        STATE.chunks.append([])
    elif closeChunk:
        if not STATE.chunks:
            raise MayaError("undoInfo: no open chunk")
        entries = STATE.chunks.pop()  # one undo step for everything inside the chunk
        if entries and STATE.chunks:
            STATE.chunks[-1].extend(entries)
        elif entries:
            STATE.undo_queue.append(entries)
    else:
        raise TypeError("undoInfo: give a flag")
    return None


@_command()
def undo() -> None:
    STATE.undo()


# ------------------------------------------------------------------------- plug-ins
def _plugin_file(name: str) -> Path:
    candidate = Path(name)
    if candidate.is_absolute() and candidate.exists():
        return candidate
    for folder in STATE.plugin_path + os.environ.get("MAYA_PLUG_IN_PATH", "").split(
            os.pathsep):
        if folder and (Path(folder) / name).exists():
            return Path(folder) / name
    raise MayaError(f"Plug-in, \"{name}\", was not found on MAYA_PLUG_IN_PATH.")


@_command()
def loadPlugin(name: str, quiet: bool = False) -> list[str]:  # noqa: N802
    path = _plugin_file(name)
    key = path.name
    if key in STATE.plugins:
        return [path.stem]
    spec = importlib.util.spec_from_file_location(f"_plugin_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    if not hasattr(module, "maya_useNewAPI"):
        raise MayaError(f"{key}: a Python API 2.0 plug-in must define maya_useNewAPI()")
    from maya.api.OpenMaya import MObject

    STATE.plugins[key] = {"module": module, "commands": {}}
    handle = MObject(key)
    handle._plugin = key
    try:
        module.initializePlugin(handle)
    except Exception:
        del STATE.plugins[key]
        raise
    return [path.stem]


@_command()
def pluginInfo(name: str, query: bool = False, loaded: bool = False):  # noqa: N802
    if not query or not loaded:
        raise TypeError("pluginInfo: this fake answers -query -loaded only")
    return Path(name).name in STATE.plugins


@_command()
def unloadPlugin(name: str) -> None:  # noqa: N802
    entry = STATE.plugins[Path(name).name]
    from maya.api.OpenMaya import MObject

    handle = MObject(Path(name).name)
    handle._plugin = Path(name).name
    entry["module"].uninitializePlugin(handle)
    del STATE.plugins[Path(name).name]


def _run_plugin_command(name: str, creator):
    def run(*args):
        STATE.calls[f"cmds.{name}"] += 1
        from maya.api.OpenMaya import MArgList

        command = creator()
        command.doIt(MArgList(args))
        if command.isUndoable():
            STATE.record(("command", command))
        STATE.touch()
    return run


def __getattr__(name: str):
    for plugin in STATE.plugins.values():
        if name in plugin["commands"]:
            return _run_plugin_command(name, plugin["commands"][name])
    raise AttributeError(f"module 'maya.cmds' has no attribute '{name}'")


# ------------------------------------------------------------------------- UI (interactive only)
def _interactive(what: str) -> None:
    if STATE.batch:
        raise MayaError(f"{what}: not available in batch mode")


@_command()
def progressWindow(query: bool = False, edit: bool = False, title: str | None = None,  # noqa: N802
                   progress: int | None = None, status: str | None = None,
                   isInterruptable: bool | None = None, isCancelled: bool = False,  # noqa: N803
                   endProgress: bool = False, maxValue: int | None = None):  # noqa: N803
    _interactive("progressWindow")
    ui = STATE.ui
    if query:
        if not isCancelled:
            raise TypeError("progressWindow -query: this fake answers -isCancelled")
        return bool(ui.get("cancel_at") is not None and ui["progress"] is not None
                    and ui["progress"]["progress"] >= ui["cancel_at"])
    if endProgress:
        ui["progress"] = None
        return None
    if edit:
        if ui["progress"] is None:
            raise MayaError("progressWindow: no progress window to edit")
        if progress is not None:
            ui["progress"]["progress"] = progress
        return None
    ui["progress"] = {"title": title, "progress": progress or 0, "max": maxValue or 100}
    ui["progress_windows"] = ui.get("progress_windows", 0) + 1
    return None


@_command()
def workspaceControl(name: str, exists: bool = False, label: str | None = None,  # noqa: N802
                     retain: bool | None = None, initialWidth: int | None = None,  # noqa: N803
                     tabToControl=None, uiScript: str | None = None,  # noqa: N803
                     edit: bool = False, restore: bool = False, visible: bool | None = None,
                     loadImmediately: bool = False):  # noqa: N803
    """Creating a control runs its ``uiScript`` to build the contents (workspaceControl docs:
    "the specified script will be invoked to build the UI") when ``loadImmediately`` is on;
    otherwise Maya delays it "until the control is actually shown" (the default: off), which
    here, with no window shown, is never."""
    controls = STATE.ui["workspace"]
    if exists:
        return name in controls
    _interactive("workspaceControl")
    if edit:
        if name not in controls:
            raise MayaError(f"workspaceControl: no control {name}")
        return name
    if uiScript is None or not isinstance(uiScript, str):
        raise MayaError("workspaceControl: -uiScript (a string) is required")
    if name in controls:
        raise MayaError(f"workspaceControl: {name} already exists")
    controls[name] = uiScript
    if not loadImmediately:
        return name
    STATE.ui["ui_scripts"] += 1
    exec(uiScript, {})  # noqa: S102 - what Maya does with the string
    return name


@_command()
def deleteUI(name: str) -> None:  # noqa: N802
    STATE.ui["workspace"].pop(name, None)
    STATE.ui["menus"].pop(name, None)


@_command()
def menu(name: str | None = None, exists: bool = False, label: str | None = None,
         parent: str | None = None, tearOff: bool = False) -> str | bool:  # noqa: N803
    if exists:
        return name in STATE.ui["menus"]
    _interactive("menu")
    STATE.ui["menus"][name] = {"label": label, "items": []}
    return str(name)


@_command()
def menuItem(parent: str, label: str | None = None, command=None,  # noqa: N802
             divider: bool = False) -> str:
    STATE.ui["menus"][parent]["items"].append(label or "-")
    return f"{parent}|{label}"


@_command()
def warning(message: str) -> None:
    STATE.ui.setdefault("warnings", []).append(message)


@_command()
def confirmDialog(title: str = "", message: str = "", button=None,  # noqa: N802
                  defaultButton=None, cancelButton=None, dismissString=None,  # noqa: N803
                  icon=None) -> str:
    _interactive("confirmDialog")
    STATE.ui.setdefault("dialogs", []).append(message)
    return STATE.ui.get("answer", "Run")


@_command()
def inViewMessage(assistMessage: str = "", position: str = "", fade: bool = False) -> None:  # noqa: N802, N803
    STATE.ui.setdefault("messages", []).append(assistMessage)
