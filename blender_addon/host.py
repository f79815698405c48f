"""BlenderHost: the Host protocol on Blender's Python API (``bpy``, Blender 4.2+; CI runs 4.5 LTS).

How it talks to Blender (each call checked against the Blender Python API reference, see
docs/blender.md):

- **The character** is one armature object: the one named at construction, else the active
  object if it is an armature, else the only selected (or only) armature of the scene. Nodes are
  its pose bones; every leaf bone also gets an End Site node ``"<bone>_end"`` at its tail, so
  world positions reach the tips of the limbs (BVH End Sites become those tails on import).
- **Channels**: ``pose.bones["B"].location[i]`` and ``.rotation_euler[i]`` are the engine's
  ``B.Xposition`` … and ``B.Xrotation`` … (rotations in degrees here, radians in Blender). A bone
  in Euler mode ``"XYZ"`` turns about X first, so its local rotation is Rz·Ry·Rx: the engine lists
  its rotation channels Z, Y, X. A location is expressed in the bone's rest frame and added to
  the rest offset (the clip's ``translation_space="oriented"``).
- **Reading**: one ``scene.frame_set`` per frame, then ``foreach_get`` of the pose bones'
  ``location``, ``rotation_euler`` and, for an analysis, ``scale`` (the animation system
  writes the evaluated values back to the original pose bones, NLA included) and of the
  evaluated object's bone ``head``/``tail``
  (constraints included): a handful of calls per frame, none per channel per frame. The
  engine's forward kinematics of the channels is checked against Blender's own head positions
  on every frame read; a mismatch (constraints, scale) becomes a note, and the analysis keeps
  to the channels' own motion, which is what Apply writes and Blender constrains again.
- **Writing**: the armature's active action is pushed down onto an NLA track of its own (as
  Blender's *Push Down* does; the action itself is never edited); each layer is a **new action
  on a new NLA track** above it, one strip over the reduced range: Replace blending for the
  reduction, Add blending for the residual (the residual weight as influence) and for the
  corrective keys (linear F-curves with only their few keys, the strip holding its ends). The
  reduction's keys are Bézier with the engine's handles (aligned for one tangent per key, free
  when broken), type ``BREAKDOWN`` for breakdown keys. All of it is one ``ed.undo_push``; if
  anything fails the data made so far is deleted again.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, cast

import numpy as np
from scipy.spatial.transform import Rotation

from sp_core.clip import REFERENCE_HEIGHT_MM, Clip
from sp_core.curves import KeyedCurves
from sp_core.errors import ClipError, Note, SalientPosesError
from sp_core.euler import unwrap_euler
from sp_core.host import (
    HostError,
    LayerHandle,
    LazyModule,
    host_step,
    in_parent_frame,
    muted,
    sparse_keys,
)
from sp_core.tangents import to_blender

bpy: Any = LazyModule("bpy")

#: Engine attribute ↔ (pose-bone property, array index).
PROPERTIES = {"Xposition": ("location", 0), "Yposition": ("location", 1),
              "Zposition": ("location", 2), "Xrotation": ("rotation_euler", 0),
              "Yrotation": ("rotation_euler", 1), "Zrotation": ("rotation_euler", 2)}
EULER_MODES = ("XYZ", "XZY", "YXZ", "YZX", "ZXY", "ZYX")
#: Bytes of a name Blender keeps (its 64-byte name fields, with the closing zero).
NAME_BYTES = 63
#: Suffix of the End Site node made for each leaf bone's tail.
TAIL = "_end"

#: Timeline markers of the keyframe preview start with this.
MARKER = "SP "
#: Object custom property naming the NLA track that holds the pushed-down original action ...
PUSHED = "salient_poses_pushed_down"
#: ... and the action on it (a track is known by its name and its action: names may repeat)
PUSHED_ACTION = "salient_poses_pushed_action"
#: ... and whether it was the object's only animation (no NLA track before): the animation
#: data's blending then acted on nothing, and Remove leaves it as the user set it
PUSHED_ALONE = "salient_poses_pushed_alone"
#: Where the pushed-down original went: kept on the object and on every layer's action.
PUSH_RECORD = (PUSHED, PUSHED_ACTION, PUSHED_ALONE)
#: Why a connected bone's location channels are left alone: Blender ignores them (the bone's
#: head is its parent's tail), though its FBX importer keys them on every bone.
CONNECTED = "connected bone: Blender ignores its location"
#: Action custom property marking the actions this tool made (its value: the layer kind, or
#: :data:`EDIT` for a propagated edit's additive layer).
MADE = "salient_poses_layer"
#: The kind of a propagated edit's layer: the artist's, which reads of the motion include.
EDIT = "edit"
#: Handle types per tangent mode: one tangent per key keeps the handles aligned.
HANDLE_TYPES = {"unified": "ALIGNED", "weighted": "ALIGNED", "broken": "FREE", "smooth": "FREE"}
#: A bone's world position may differ this much (fraction of the character's height, or of
#: the farthest it gets from the origin if more) from the engine's forward kinematics of its
#: channels before the read says so (Blender stores pose values in single precision: about
#: 1e-6 of the height on long chains, and of the distance travelled: a one-bone armature of
#: 0.1 units whose root travels 60 units was 3e-6 units off).
FK_TOLERANCE = 1e-5
#: A pose bone's scale this far from 1 (single-precision values) is said in a note.
SCALE_TOLERANCE = 1e-4


def tail_name(bone: str, bones: Any) -> str:
    """The End Site node of leaf ``bone``: ``<bone>_end``, or ``<bone>_end2``… where a bone of
    that name exists (``bones``: a container of bone names)."""
    name, k = bone + TAIL, 1
    while name in bones:
        k += 1
        name = f"{bone}{TAIL}{k}"
    return name


def data_path(bone: str, prop: str) -> str:
    """F-curve data path of a pose-bone property (quotes in the name escaped as Blender does)."""
    escaped = bone.replace("\\", "\\\\").replace('"', '\\"')
    return f'pose.bones["{escaped}"].{prop}'


def channel_target(channel: str) -> tuple[str, str, int]:
    """(bone, property, index) of an engine channel ``"<bone>.<attribute>"``."""
    bone, _, attribute = channel.rpartition(".")
    if attribute not in PROPERTIES:
        raise SalientPosesError(f"channel {channel!r} is not a location or rotation channel")
    prop, index = PROPERTIES[attribute]
    return bone, prop, index


@dataclass
class _Journal:
    """What an undo chunk has made, so that a failure can take it away again."""

    tracks: list[tuple[str, str, str]] = field(default_factory=list)  # (object, track, action)
    actions: list[str] = field(default_factory=list)
    pushed: list[tuple[str, str, str]] = field(default_factory=list)  # (object, track, action)


class BlenderHost:
    """The current Blender scene's armature as a Salient Poses host.

    Parameters
    ----------
    armature : str, optional
        Name of the armature object (default: see the module notes).
    undo_push : bool
        Push one undo step per :meth:`undo_chunk` (default). An operator registered with the
        ``UNDO`` option would get Blender's own push instead.

    Attributes
    ----------
    skipped : dict of str to str
        Animated channels Apply leaves alone, with the reason (a locked channel).
    notes : list of str
        What the last read or write wants the user to know.
    """

    name = "Blender"

    def __init__(self, armature: str | None = None, undo_push: bool = True) -> None:
        self.armature = armature
        self.undo_push = undo_push
        self.skipped: dict[str, str] = {}
        self.notes: list[str] = []
        self._journal: _Journal | None = None

    # ------------------------------------------------------------------ scene and time
    @property
    def scene(self) -> Any:
        return bpy.context.scene

    def object(self) -> Any:
        """The armature object (looked up by name each time: undo replaces Blender's data)."""
        if self.armature is not None:
            found = bpy.data.objects.get(self.armature)
            if found is None or found.type != "ARMATURE":
                raise HostError(f"no armature object named {self.armature!r} in the file")
            return found
        active = bpy.context.view_layer.objects.active
        if active is not None and active.type == "ARMATURE":
            return active
        selected = [o for o in self.scene.objects if o.type == "ARMATURE" and o.select_get()]
        every = [o for o in self.scene.objects if o.type == "ARMATURE"]
        for group in (selected, every):
            if len(group) == 1:
                return group[0]
        raise HostError("select an armature: make the character's armature the active object "
                        f"({len(every)} armatures in the scene)")

    @property
    def fps(self) -> float:
        render = self.scene.render
        return float(render.fps) / float(render.fps_base)

    def playback_range(self) -> tuple[int, int]:
        """The preview range when it is on (what playback loops over), else the scene range."""
        scene = self.scene
        if scene.use_preview_range:
            return int(scene.frame_preview_start), int(scene.frame_preview_end)
        return int(scene.frame_start), int(scene.frame_end)

    def current_frame(self) -> int:
        return int(self.scene.frame_current)

    def set_current_frame(self, frame: int) -> None:
        with host_step(f"going to frame {frame}"):
            self.scene.frame_set(int(frame))

    # ------------------------------------------------------------------ structure
    def selected_nodes(self) -> list[str]:
        """Selected pose bones without a selected ancestor (Pose Mode), else the root bones."""
        with host_step("reading the selection"):
            obj = self.object()
            bones = obj.data.bones
            if obj.mode == "POSE":
                chosen = {b.name for b in bones if b.select}
                tops = [b.name for b in bones if b.name in chosen and not any(
                    a.name in chosen for a in b.parent_recursive)]
                if tops:
                    return tops
            return [b.name for b in bones if b.parent is None]

    def hierarchy(self, roots: Sequence[str]) -> list[tuple[str, str | None]]:
        with host_step("reading the bone hierarchy"):
            bones = self.object().data.bones
            if not roots:
                roots = [b.name for b in bones if b.parent is None]
            result: list[tuple[str, str | None]] = []
            seen: set[str] = set()
            for root in roots:
                if root not in bones:
                    raise HostError(f"no bone {root!r} in armature {self.object().name!r}")
                queue: list[tuple[Any, str | None]] = [(bones[root], None)]
                while queue:
                    bone, parent = queue.pop(0)
                    if bone.name in seen:
                        continue
                    seen.add(bone.name)
                    result.append((bone.name, parent))
                    queue.extend((child, bone.name) for child in bone.children)
            return result

    # ------------------------------------------------------------------ reading
    def _frames(self, frames: Sequence[int] | np.ndarray) -> Iterator[int]:
        """Go to each frame in turn; the scene's own frame comes back afterwards."""
        scene = self.scene
        start = scene.frame_current
        try:
            for i, frame in enumerate(frames):
                scene.frame_set(int(frame))
                yield i
        finally:
            scene.frame_set(start)

    def _bone_points(self, obj: Any, names: Sequence[str]) -> tuple[np.ndarray, np.ndarray]:
        """Index into (heads ++ tails) of every node name, and the world matrix (4, 4)."""
        order = {b.name: i for i, b in enumerate(obj.pose.bones)}
        count = len(order)
        tails = {tail_name(bone, order): bone for bone in order}
        index = []
        for name in names:
            if name in order:
                index.append(order[name])
            elif name in tails:
                index.append(count + order[tails[name]])
            else:
                raise HostError(f"no bone {name!r} in armature {obj.name!r}")
        return np.asarray(index), np.array(obj.matrix_world)

    def _read_points(self, obj: Any) -> np.ndarray:
        """(2 n_bones, 3) armature-space heads then tails of the evaluated pose."""
        evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get())
        bones = evaluated.pose.bones
        out = np.empty((2, len(bones) * 3), dtype=np.float32)
        bones.foreach_get("head", out[0])
        bones.foreach_get("tail", out[1])
        return out.reshape(-1, 3).astype(np.float64)

    def world_positions(self, nodes: Sequence[str], frames: Sequence[int] | np.ndarray
                        ) -> np.ndarray:
        """World positions of bones (heads) and End Sites (tails) from the depsgraph."""
        with host_step("reading world positions"):
            obj = self.object()
            index, world = self._bone_points(obj, nodes)
            out = np.empty((len(frames), len(nodes), 3))
            for i in self._frames(frames):
                points = self._read_points(obj)[index]
                out[i] = points @ world[:3, :3].T + world[:3, 3]
        return out

    def _fcurves(self, obj: Any) -> dict[tuple[str, int], Any]:
        """F-curves of the active action by (data path, index) (empty without one)."""
        data = obj.animation_data
        action = data.action if data is not None else None
        if action is None:
            return {}
        return {(fc.data_path, fc.array_index): fc for fc in _action_fcurves(action, data)}

    def _animated_paths(self, obj: Any) -> set[tuple[str, int]]:
        """(data path, index) animated by the active action or any NLA strip's action."""
        found = set(self._fcurves(obj))
        data = obj.animation_data
        if data is not None:
            for track in data.nla_tracks:
                for strip in track.strips:
                    if strip.action is not None and not track.mute:
                        found |= {(fc.data_path, fc.array_index)
                                  for fc in _action_fcurves(strip.action, None)}
        return found

    def animated_channels(self, nodes: Sequence[str]) -> list[str]:
        with host_step("reading the animated channels"):
            obj = self.object()
            animated = self._animated_paths(obj)
            result = []
            for node in nodes:
                bone = obj.pose.bones[node]
                for attribute, (prop, index) in PROPERTIES.items():
                    if (data_path(node, prop), index) not in animated:
                        continue
                    channel = f"{node}.{attribute}"
                    why = _left_alone(bone, prop, index)
                    if why is not None:
                        self.skipped[channel] = why
                    else:
                        result.append(channel)
            return result

    def _read_channels(self, obj: Any, frames: Sequence[int], points: bool = False,
                       carriers: Sequence[str] = ()
                       ) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, np.ndarray,
                                  np.ndarray | None]:
        """Per frame: locations (n, n_bones, 3), Euler rotations in radians (n, n_bones, 3),
        with ``points`` heads and tails (n, 2 n_bones, 3), the armature-space pose matrices
        of the ``carriers`` bones (n, n_carriers, 4, 4), and with ``points`` the pose bones'
        scales (n, n_bones, 3), all from one frame_set."""
        bones = obj.pose.bones
        n = len(bones)
        location = np.empty((len(frames), n * 3), dtype=np.float32)
        rotation = np.empty((len(frames), n * 3), dtype=np.float32)
        heads = np.empty((len(frames), 2 * n, 3)) if points else None
        scale = np.empty((len(frames), n * 3), dtype=np.float32) if points else None
        carried = np.empty((len(frames), len(carriers), 4, 4))
        for i in self._frames(frames):
            bones.foreach_get("location", location[i])
            bones.foreach_get("rotation_euler", rotation[i])
            if heads is not None and scale is not None:
                heads[i] = self._read_points(obj)
                bones.foreach_get("scale", scale[i])
            if carriers:
                evaluated = obj.evaluated_get(bpy.context.evaluated_depsgraph_get()).pose.bones
                for j, name in enumerate(carriers):
                    carried[i, j] = np.array(evaluated[name].matrix)
        return (location.reshape(-1, n, 3).astype(np.float64),
                rotation.reshape(-1, n, 3).astype(np.float64), heads, carried,
                None if scale is None else scale.reshape(-1, n, 3).astype(np.float64))

    def channel_values(self, channels: Sequence[str], first: int, last: int,
                       beneath: bool = False) -> np.ndarray:
        """Composite values (NLA included, or with ``beneath`` without this tool's reduction
        tracks) in engine units: degrees for rotations."""
        if beneath:
            with self._without_made():
                return self.channel_values(channels, first, last)
        with host_step(f"reading {len(channels)} channels"):
            obj = self.object()
            order = {b.name: i for i, b in enumerate(obj.pose.bones)}
            location, rotation, _, _, _ = self._read_channels(obj, range(first, last + 1))
            out = np.empty((last - first + 1, len(channels)))
            for c, channel in enumerate(channels):
                bone, prop, index = channel_target(channel)
                if bone not in order:
                    raise HostError(f"no bone {bone!r} in armature {obj.name!r}")
                source = location if prop == "location" else np.degrees(rotation)
                out[:, c] = source[:, order[bone], index]
            return out

    def _check_object(self, obj: Any) -> np.ndarray:
        world = np.array(obj.matrix_world)
        if not np.isfinite(world).all():  # (said as a scale of [nan nan nan] to apply)
            found = [f"{fcurve.data_path}[{fcurve.array_index}] at frame {frame:g}"
                     for fcurve, frame in _not_a_number(obj) if not fcurve.data_path.startswith(
                         "pose.")]
            raise HostError(
                f"armature {obj.name!r} has no place in the world at frame "
                f"{self.current_frame()}: its own transform (or a parent's) is not a number "
                f"(NaN or infinity){': ' + ', '.join(found[:4]) if found else ''}; fix "
                f"{'those keys' if len(found) > 1 else 'that key' if found else 'it'} and "
                "analyse again")
        turn = world[:3, :3]
        mirrored = np.linalg.det(turn) < 0
        if not np.allclose(turn @ turn.T, np.eye(3), atol=1e-5) or mirrored:
            scale = np.linalg.norm(turn, axis=0)
            # (a mirror was said as "scale [1. 1. 1.]", and a parent's scale sent the user to
            # apply the armature's own, which is 1)
            why = "is mirrored (a negative scale)" if mirrored \
                else f"is scaled (scale {np.round(scale, 4)})"
            parent = obj.parent
            if parent is not None and np.allclose(np.abs(np.array(obj.scale)), 1.0,
                                                   atol=1e-5):
                fix = (f"its parent {parent.name!r} scales it: apply the parent's scale or "
                       "clear the parent keeping its transform (Alt+P) first")
            else:
                fix = "apply its scale first (Object > Apply > Scale)"
            raise HostError(f"armature {obj.name!r} {why}; {fix} so that joint positions are "
                            "in scene units")
        return world

    def motion(self, roots: Sequence[str], first: int, last: int) -> Clip:
        """The bones under ``roots`` as a clip, a root below the armature's top read in its
        parent's frame (see :meth:`sp_core.clip.Clip.subtrees`; the height stays the whole
        armature's): rest offsets and orientations from the armature, location and Euler rotation
        channels read from the scene over the range, without the reduction tracks this tool
        made (an Analyze after Apply analyses the motion, not its reduction: it read the
        composite and reported the reduction's error against itself; a propagated edit, the
        artist's, is read)."""
        with self._without_made():
            return self._motion(roots, first, last)

    @contextmanager
    def _without_made(self) -> Iterator[None]:
        """The reduction tracks this tool made that play muted for the block, then on again
        (an edit's track stays on)."""
        data = self.object().animation_data
        made = [] if data is None else [
            t for t in data.nla_tracks if not t.mute
            and any(s.action is not None and MADE in s.action and s.action[MADE] != EDIT
                    for s in t.strips)]
        with muted(made, _set_mute):
            yield

    def motion_digest(self) -> str:
        """A digest of the keys of every action the armature plays that this tool did not
        make (its active action and its NLA strips'): the session compares it before Apply, so
        keys edited since the analysis are not hidden under a reduction of the motion before
        the edit. Apply and Remove leave it as it is (they only move the original action to a
        track and back). The F-curves' paths are left out: a renamed bone renames them, which
        Apply refuses by name. What decides whether a curve plays is in it too: its mute,
        extrapolation and modifiers, its track's or strip's mute, and a soloed track (an
        elbow muted after Analyze was keyed again by Apply)."""
        data = self.object().animation_data
        if data is None:
            return ""
        played = [] if data.action is None or MADE in data.action \
            else [(data.action, data, False)]
        # (a strip's action through the strip's own slot, as the armature plays it: an
        # action with several slots holds other objects' curves too)
        played += [(strip.action, strip, track.mute or strip.mute)
                   for track in data.nla_tracks for strip in track.strips
                   if strip.action is not None and MADE not in strip.action]
        digest = hashlib.sha256()
        digest.update(f"solo {_soloed(data) is not None}".encode())
        for action, owner, mute in sorted(played, key=lambda found: found[0].name):
            digest.update(f"{action.name} {mute}".encode())
            for fcurve in _action_fcurves(action, owner):
                points = fcurve.keyframe_points
                digest.update(f"[{fcurve.array_index}]{len(points)} {fcurve.mute} "
                              f"{fcurve.extrapolation} {len(fcurve.modifiers)}".encode())
                for attribute in ("co", "handle_left", "handle_right"):
                    values = np.empty(2 * len(points), dtype=np.float32)
                    points.foreach_get(attribute, values)
                    digest.update(values.tobytes())
                kinds = np.empty(len(points), dtype=np.int32)
                points.foreach_get("interpolation", kinds)
                digest.update(kinds.tobytes())
        return digest.hexdigest()

    def _motion(self, roots: Sequence[str], first: int, last: int) -> Clip:
        self.skipped.clear()
        self.notes = []
        with host_step("reading the armature"):
            obj = self.object()
            if obj.mode == "EDIT":  # its pose is not evaluated there: every frame reads alike
                raise HostError(f"armature {obj.name!r} is in Edit Mode, where its bones do not "
                                "move; leave Edit Mode (Tab) and analyse again")
            # a selected bone is read in its parent's frame, as Maya and MotionBuilder read a
            # selected joint: keying the ancestors that carry it would move the whole body
            bones, listed = obj.data.bones, set(roots)
            tops = [r for r in dict.fromkeys(roots) if r not in bones  # (hierarchy names it)
                    or not any(a.name in listed for a in bones[r].parent_recursive)]
            nodes = self.hierarchy(tops)
            if not nodes:
                raise HostError("nothing to analyse: select an armature (or bones in Pose Mode)")
            carriers = list(dict.fromkeys(obj.data.bones[t].parent.name for t in tops
                                          if obj.data.bones[t].parent is not None))
            world = self._check_object(obj)
            animated = self._animated_paths(obj)
            pose = obj.pose.bones
            order = {b.name: i for i, b in enumerate(pose)}
            wrong = [f"{n} ({pose[n].rotation_mode})" for n, _ in nodes
                     if pose[n].rotation_mode not in EULER_MODES and any(
                         (data_path(n, p), i) in animated
                         for p in ("rotation_quaternion", "rotation_axis_angle")
                         for i in range(4))]
            if wrong:
                raise HostError("these bones are animated in quaternion or axis-angle rotation "
                                "(as Blender's FBX importer makes them), which the engine does "
                                "not fit; press Convert to Euler in the Salient Poses panel "
                                "(a new action, the original is kept): " + ", ".join(wrong))
        with host_step(f"reading the animation over frames {first}..{last}"):
            frames = list(range(first, last + 1))
            location, rotation, points, carried, scale = self._read_channels(
                obj, frames, points=True, carriers=carriers)
            assert points is not None and scale is not None
        # a NaN scale key puts the bones below it nowhere, and no channel the engine reads
        # says so (it passed, with a normal error, and Apply wrote over it)
        bad_scale = ~np.isfinite(scale)
        if bad_scale.any():
            row, at, axis = (int(i) for i in np.argwhere(bad_scale)[0])
            raise HostError(f"{pose[at].name}'s scale ({'XYZ'[axis]}) is not a number (NaN or "
                            f"infinity) at frame {first + row}: Blender places the bones below "
                            "it nowhere; fix that key and analyse again")
        if not np.isfinite(points).all() and np.isfinite(location).all() \
                and np.isfinite(rotation).all():  # (a NaN channel is named by the session)
            row, at = (int(i) for i in np.argwhere(~np.isfinite(points).all(axis=-1))[0])
            bone = pose[at % len(pose)].name
            raise HostError(f"Blender places {bone} nowhere (NaN) at frame {first + row}: a "
                            "constraint or driver on it or above it gives no number; fix it "
                            "and analyse again")
        names: list[str] = []
        parents: list[int] = []
        offsets: list[np.ndarray] = []
        orients: list[np.ndarray] = []
        ends: list[bool] = []
        channel_names: list[str] = []
        columns: list[np.ndarray] = []
        point_index: list[int] = []
        frame_of: list[int] = []  # per node: the carrier whose frame it is read in, -1 world
        for name, parent in nodes:
            bone = obj.data.bones[name]
            rest = np.array(bone.matrix_local)
            if bone.parent is None:
                relative = world @ rest
            else:
                relative = np.linalg.solve(np.array(bone.parent.matrix_local), rest)
            j = len(names)
            names.append(name)
            parents.append(names.index(parent) if parent is not None else -1)
            frame_of.append(frame_of[parents[-1]] if parent is not None else
                            -1 if bone.parent is None else carriers.index(bone.parent.name))
            offsets.append(relative[:3, 3])
            orients.append(relative[:3, :3])
            ends.append(False)
            point_index.append(order[name])
            b = order[name]
            moved = bool(np.any(location[:, b] != 0))
            if not bone.use_connect and (moved or any(  # (a connected bone's is ignored)
                    (data_path(name, "location"), i) in animated for i in range(3))):
                for axis in range(3):
                    channel_names.append(f"{name}.{'XYZ'[axis]}position")
                    columns.append(location[:, b, axis])
            mode = pose[name].rotation_mode
            euler = mode if mode in EULER_MODES else "XYZ"
            if mode not in EULER_MODES:  # unanimated quaternion bone: its constant as Euler
                turn = np.array(pose[name].matrix_basis)[:3, :3]
                constant = Rotation.from_matrix(turn).as_euler("ZYX")[::-1]
                rotation[:, b] = constant
            for letter in reversed(euler):
                channel_names.append(f"{name}.{letter}rotation")
                columns.append(np.degrees(rotation[:, b, "XYZ".index(letter)]))
            for attribute, (prop, index) in PROPERTIES.items():
                why = _left_alone(pose[name], prop, index)
                if why is not None and (data_path(name, prop), index) in animated:
                    self.skipped[f"{name}.{attribute}"] = why
            if not bone.children:
                names.append(tail_name(name, pose))
                parents.append(j)
                offsets.append(np.array([0.0, bone.length, 0.0]))
                orients.append(np.eye(3))
                ends.append(True)
                point_index.append(len(pose) + order[name])
                frame_of.append(frame_of[j])
        clip = Clip(names, parents, np.array(offsets), ends, channel_names,
                    np.stack(columns, axis=1), self.fps, first_frame=first, name=obj.name,
                    orients=np.array(orients), up_axis="z", translation_space="oriented",
                    character_height=_height(obj, world),
                    held_channels=[c for c in channel_names if c in self.skipped])
        blender = points[:, point_index] @ world[:3, :3].T + world[:3, 3]
        for c in range(len(carriers)):  # a selected bone's subtree, in its parent's frame
            inside = np.flatnonzero(np.asarray(frame_of) == c)
            blender[:, inside] = in_parent_frame(points[:, np.asarray(point_index)[inside]],
                                                 carried[:, c])
        miss = np.linalg.norm(clip.positions - blender, axis=-1)
        try:
            size = clip.height()
        except ClipError:  # one bone: no body to measure, the distance it travels is the reach
            size = 0.0
        reach = max(size, float(np.abs(blender).max(initial=0.0)))
        if miss.size and miss.max() > FK_TOLERANCE * reach:
            f, n = np.unravel_index(int(np.argmax(miss)), miss.shape)
            # (in mm too, as the errors are said: scene units alone meant little beside them)
            mm = f" ({miss[f, n] * REFERENCE_HEIGHT_MM / size:.1f} mm for the character " \
                "scaled to 1.7 m)" if size > 0 else ""
            self.notes.append(
                f"{names[n]} is {miss[f, n]:.4g} scene units{mm} away from where its channels "
                f"put it at frame {first + f} (constraints or scale?): the analysis fits and "
                "measures the channels' own motion, which Blender constrains and scales again "
                "after Apply as it does the original's; the errors shown are of that motion, "
                "not of the positions Blender shows")
        scaled = _scaled(obj, [name for name, _ in nodes], scale, order)
        if scaled:
            self.notes.append(
                "Blender scales the pose of " + ", ".join(
                    f"{name} ({factor})" for name, factor in scaled) + ": the analysis "
                "measures the bones below at their rest size, so their errors play that many "
                "times as large as shown")
        lying = _lying(obj, world)
        if lying is not None:
            self.notes.append(lying)
        data = obj.animation_data
        soloed = None if data is None else _soloed(data)
        if soloed is not None:
            self.notes.append(f"NLA track {soloed!r} is soloed: Blender plays it alone, so the "
                              "analysis reads it alone, and Apply waits until it is un-soloed "
                              "(the layers it writes would not play)")
        if data is None or (data.action is None and not any(
                s.action is not None for t in data.nla_tracks for s in t.strips)):
            self.notes.append(f"armature {obj.name!r} has no action nor NLA strip: nothing "
                              "moves")
        moving = [name for name, column in zip(channel_names, columns, strict=True)
                  if np.ptp(column) > 0]
        if moving and all(name in self.skipped for name in moving):
            self.notes.append(
                "every channel that moves is left alone (" + ", ".join(sorted(set(
                    self.skipped[name] for name in moving))) + "): Apply would write nothing; "
                "unlock them (the bone's Transform locks) to reduce them")
        span = _keyed_span(obj)
        if span is not None and span[0] == span[1]:  # (a range of it could not be analysed)
            self.notes.append(f"the animation's keys are all on frame {span[0]}: it holds one "
                              "pose, nothing to reduce")
        elif span is not None and (last < span[0] or first > span[1]):  # no key in the range
            self.notes.append(Note(
                f"frames {first}..{last} hold none of the animation's keys ({span[0]}.."
                f"{span[1]}): set the scene's frame range or frame_range to {span[0]}.."
                f"{span[1]}", options=("frame_range",)))
        elif span is not None and (first < span[0] or last > span[1]):
            self.notes.append(Note(
                f"frames {first}..{last} reach past the animation's keys ({span[0]}..{span[1]}): "
                "the frames outside hold its first or last pose and are analysed too; set the "
                f"scene's frame range or frame_range to {max(first, span[0])}.."
                f"{min(last, span[1])} to leave them out", options=("frame_range",)))
        return clip

    def convert_to_euler(self, order: str = "XYZ") -> list[str]:
        """Give the quaternion and axis-angle bones Euler rotation in a NEW action.

        The active action is copied (``<name> (Euler)``); in the copy every such bone's
        rotation curves are replaced by ``rotation_euler`` keys on every frame of the action's
        range (linear, continuous angles); the bones' Rotation Mode becomes ``order`` and the
        copy becomes the active action. The original action is kept unchanged (with a fake user
        so that saving keeps it). Call inside :meth:`undo_chunk`. Returns the converted bones.
        """
        if order not in EULER_MODES:
            raise HostError(f"Euler order must be one of {', '.join(EULER_MODES)}; got {order!r}")
        with host_step("converting quaternion rotations to Euler"):
            obj = self.object()
            data = obj.animation_data
            action = data.action if data is not None else None
            if action is None:
                raise HostError(f"armature {obj.name!r} has no active action to convert")
            pose = obj.pose.bones
            bones = [b.name for b in pose if b.rotation_mode not in EULER_MODES]
            if not bones:
                return []
            first, last = (int(round(v)) for v in action.frame_range)
            frames = np.arange(first, last + 1)
            turns = np.empty((len(frames), len(bones), 3, 3))
            for i in self._frames(frames):
                for j, name in enumerate(bones):
                    turns[i, j] = np.array(pose[name].matrix_basis)[:3, :3]
            copy = action.copy()
            copy.name = f"{action.name} (Euler)"
            action.use_fake_user = True
            if self._journal is not None:
                self._journal.actions.append(copy.name)
            bag = _Channels.existing(copy)
            listed = "".join(reversed(order))  # Blender "XYZ" turns X first: R = Rz Ry Rx
            for j, name in enumerate(bones):
                for prop in ("rotation_quaternion", "rotation_axis_angle", "rotation_euler"):
                    for index in range(4):
                        bag.remove(data_path(name, prop), index)
                angles = Rotation.from_matrix(turns[:, j]).as_euler(listed, degrees=True)
                angles = np.radians(unwrap_euler(angles))
                for k, letter in enumerate(listed):
                    fcurve = bag.new(data_path(name, "rotation_euler"), "XYZ".index(letter),
                                     name)
                    points = fcurve.keyframe_points
                    points.add(len(frames))
                    points.foreach_set("co", np.stack([frames, angles[:, k]], 1).ravel())
                    points.foreach_set("interpolation", np.full(len(frames), _LINEAR, np.int32))
                    fcurve.update()
            slot = getattr(data, "action_slot", None)
            for name in bones:
                pose[name].rotation_mode = order
            data.action = copy
            if slot is not None and _slotted() and len(copy.slots):
                data.action_slot = copy.slots[0]
            self.notes = [f"converted {len(bones)} bones to Euler {order} in action "
                          f"{copy.name!r}; {action.name!r} is kept, and plays again once "
                          "those bones are back in quaternion rotation mode (Ctrl+Z undoes "
                          "the conversion)"]
            return bones

    # ------------------------------------------------------------------ writing
    def _targets(self, channels: Sequence[str], keep: np.ndarray | None
                 ) -> list[tuple[int, str, str, int]]:
        result = []
        for c, channel in enumerate(channels):
            if (keep is None or keep[c]) and channel not in self.skipped:
                bone, prop, index = channel_target(channel)
                result.append((c, bone, prop, index))
        bones = self.object().pose.bones
        gone = list(dict.fromkeys(bone for _c, bone, _p, _i in result if bone not in bones))
        if gone:  # F-curves of bones that are not there would animate nothing
            raise HostError(f"bones renamed or removed since the analysis: {', '.join(gone)}; "
                            "analyse again")
        if not result:
            if any(channel in self.skipped for channel in channels):
                raise HostError("nothing to write: every animated channel is left alone ("
                                + ", ".join(sorted(set(self.skipped.values()))) + ")")
            raise HostError("nothing to write: no channel of the armature is animated in the "
                            "analysed range (an action over other frames, or none?)")
        return result

    def _push_down(self, obj: Any) -> None:
        """Move the active action onto a new NLA track of its own (Blender's Push Down), so
        that the tracks added after it blend over it. Done once per object."""
        data = obj.animation_data
        if data is None or data.action is None or PUSHED in obj:
            return
        action = data.action
        slot = getattr(data, "action_slot", None)
        # Without an NLA track Blender plays the action as it is: the animation data's
        # blending, influence and extrapolation act on an NLA stack only (none of them moved
        # a bone of the sample), where Push Down's copy of them onto the strip did (an
        # influence of 0.5 halved the whole take outside the analysed range)
        alone = not len(data.nla_tracks)
        name = _free_track_name(data, f"{action.name} (original)")
        track = data.nla_tracks.new()  # appended: the top of the stack, as Push Down does
        track.name = name
        # In an NLA stack Blender plays an action over its frame range (a manual one if set)
        # and extrapolates as the animation data says, as a strip does; alone, it plays every
        # key and each F-curve's own extrapolation and modifiers, at every frame
        lo, hi = self._played_alone(obj, action) if alone else tuple(action.frame_range)
        start = math.floor(lo)  # the strip starts on a whole frame
        strip = track.strips.new(action.name, start, action)
        # ... and plays the action's frame f at frame f: from its whole frame, not from its
        # first key (an action whose first key is at 1001.4 played 0.4 frames early)
        if hi > strip.action_frame_end:  # (the end first: the start is kept below it)
            strip.action_frame_end = float(math.ceil(hi))
        strip.action_frame_start = float(start)
        strip.frame_start_ui = float(start)  # (the strip moves, its length kept)
        if slot is not None and hasattr(strip, "action_slot"):
            strip.action_slot = slot
        # the action blended as the animation data said (an additive layer at half weight
        # became a full replace, 30 units off on a 24-unit character): its strip keeps that,
        # as Blender's Push Down does (BKE_nla_action_pushdown; the data keeps them too, for
        # the action made active again on Remove)
        if alone:
            strip.blend_type, strip.extrapolation = "REPLACE", "HOLD"
        else:
            strip.blend_type = data.action_blend_type
            strip.extrapolation = data.action_extrapolation
            _constant_influence(strip, data.action_influence, start)
        obj[PUSHED] = track.name
        obj[PUSHED_ACTION] = action.name
        obj[PUSHED_ALONE] = alone
        # (recorded before the action is taken off, which may fail: the track goes again)
        if self._journal is not None:
            self._journal.pushed.append((obj.name, track.name, action.name))
        data.action = None

    def _played_alone(self, obj: Any, action: Any) -> tuple[float, float]:
        """The frames where ``action``, playing alone, does not hold its first or last pose:
        every key, a manual frame range aside (a strip over such a range held its ends, and
        the take moved 245 mm outside the analysed range), and where an F-curve extrapolates
        (linear extrapolation, modifiers) the scene's and the preview's range too; a note says
        so (beyond them the strip holds)."""
        keys = tuple(action.curve_frame_range)
        lo, hi = keys
        if action.use_frame_range:  # (a range wider than the keys holds their ends: the same)
            lo, hi = min(lo, action.frame_start), max(hi, action.frame_end)
        moving = [fcurve for fcurve in _action_fcurves(action, obj.animation_data)
                  if fcurve.extrapolation != "CONSTANT" or len(fcurve.modifiers)]
        if moving:
            scene = self.scene
            first, last = self.playback_range()
            lo = min(lo, scene.frame_start, first)
            hi = max(hi, scene.frame_end, last)
            self.notes.append(
                f"{len(moving)} F-curves of {action.name!r} go on past its keys (linear "
                "extrapolation or modifiers): the NLA track that now holds it plays them over "
                f"frames {math.floor(lo)}..{math.ceil(hi)} (its keys, the scene's and the "
                "preview's range) and holds its first and last pose beyond")
        return lo, hi

    def check_writable(self, obj: Any | None = None) -> None:
        """Refuse an Apply whose layers Blender would not keep or not play: a linked armature,
        NLA tweak mode, NLA evaluation off, a soloed track (the panel asks first, so that these
        are said as themselves, not as an animation changed since the analysis).

        Raises
        ------
        HostError
        """
        obj = obj if obj is not None else self.object()
        if obj.library is not None:
            # Blender lets a linked object's NLA be edited, and drops the edit on saving
            raise HostError(f"{obj.name!r} is linked from {obj.library.filepath!r}: a layer "
                            "written on it would be lost on saving; make a library override "
                            "of it (Object > Library Override > Make) and apply to that")
        data = obj.animation_data
        if data is None:
            return
        if data.use_tweak_mode:  # (its action cannot be pushed down, nor a track added)
            raise HostError(f"{obj.name!r} is in NLA tweak mode (a strip's action is being "
                            "edited in the NLA editor): leave it (Tab in the NLA editor) and "
                            "apply again")
        if not data.use_nla:
            raise HostError(f"NLA evaluation is off for {obj.name!r} (the checkbox on its row "
                            "in the NLA editor): Apply writes NLA tracks, which Blender would "
                            "not play; turn it on and apply again")
        soloed = _soloed(data)
        if soloed is not None:  # (Apply wrote its layers, said so, and nothing moved)
            raise HostError(f"NLA track {soloed!r} of {obj.name!r} is soloed (the star on its "
                            "row in the NLA editor): Blender plays it alone, not the tracks "
                            "Apply writes; un-solo it and apply again")

    def _new_layer(self, obj: Any, layer: str, kind: str, first: int) -> tuple[Any, Any, Any]:
        """A new action (with an object slot where Blender has slots) on a new top track."""
        self.check_writable(obj)
        data = obj.animation_data_create()
        self._push_down(obj)
        action = bpy.data.actions.new(layer)
        action[MADE] = kind
        # where the original went, on the layer too: a library override's object does not
        # keep properties of its own through saving (Remove then left the original off)
        for key in PUSH_RECORD:
            if key in obj:
                action[key] = obj[key]
        if self._journal is not None:
            self._journal.actions.append(action.name)
        # Blender lets two tracks share a name: a user's track named like the layer must not
        # be taken for it (Remove deleted the user's track and left ours)
        name = _free_track_name(data, action.name)
        track = data.nla_tracks.new()
        track.name = name
        if self._journal is not None:
            self._journal.tracks.append((obj.name, track.name, action.name))
        return action, track, data

    def _finish_strip(self, obj: Any, track: Any, action: Any, first: int, blend: str,
                      influence: float, extrapolation: str = "NOTHING") -> None:
        strip = track.strips.new(action.name, int(first), action)
        if hasattr(strip, "action_slot") and len(action.slots):
            strip.action_slot = action.slots[0]
        strip.blend_type = blend
        # NOTHING: outside the reduced range the original shows; HOLD (the only strip of its
        # track): the strip's first and last frames are held before and after it
        strip.extrapolation = extrapolation
        _constant_influence(strip, influence, int(first))

    def write_curves(self, curves: KeyedCurves, layer: str,
                     replacing: Sequence[LayerHandle] = ()) -> LayerHandle:
        # (replacing: nothing is read; outside the range the strip holds nothing)
        targets = self._targets(curves.channel_names, curves.animated)
        obj = self.object()
        first = int(curves.frames[0])
        with host_step(f"creating the NLA track of layer {layer!r}"):
            action, track, _data = self._new_layer(obj, layer, "override", first)
        breakdowns = set(curves.breakdown_frames)
        kinds = ["BREAKDOWN" if int(f) in breakdowns else "KEYFRAME" for f in curves.frames]
        handle_type = HANDLE_TYPES.get(curves.tangents, "FREE")
        frames = curves.frames.astype(np.float64)
        with host_step(f"writing the curves of layer {action.name!r}"):
            bag = _Channels(action, obj)
            for c, bone, prop, index in targets:
                scale = np.pi / 180.0 if prop == "rotation_euler" else 1.0
                values = curves.values[:, c] * scale
                left, right = to_blender(frames, values, curves.in_handles[:, c] * [1.0, scale],
                                         curves.out_handles[:, c] * [1.0, scale])
                fcurve = bag.new(data_path(bone, prop), index, bone)
                points = fcurve.keyframe_points
                points.add(len(frames))
                points.foreach_set("co", np.stack([frames, values], axis=1).ravel())
                points.foreach_set("handle_left", left.ravel())
                points.foreach_set("handle_right", right.ravel())
                for point, kind in zip(points, kinds, strict=True):
                    point.interpolation = "BEZIER"
                    point.handle_left_type = handle_type
                    point.handle_right_type = handle_type
                    point.type = kind
                # the handle types were set after the handles: put the handles back exactly
                points.foreach_set("handle_left", left.ravel())
                points.foreach_set("handle_right", right.ravel())
                fcurve.update()
            self._finish_strip(obj, track, action, first, "REPLACE", 1.0)
        return LayerHandle(track.name, "override", token=(obj.name, track.name, action.name))

    def write_residual(self, channels: Sequence[str], frames: np.ndarray, residual: np.ndarray,
                       layer: str, weight: float, edit: bool = False) -> LayerHandle:
        targets = self._targets(channels, None)
        obj = self.object()
        first = int(frames[0])
        with host_step(f"creating the NLA track of layer {layer!r}"):
            action, track, _data = self._new_layer(obj, layer, EDIT if edit else "additive",
                                                   first)
        times = np.asarray(frames, dtype=np.float64)
        with host_step(f"writing the residual curves of layer {action.name!r}"):
            bag = _Channels(action, obj)
            for c, bone, prop, index in targets:
                scale = np.pi / 180.0 if prop == "rotation_euler" else 1.0
                fcurve = bag.new(data_path(bone, prop), index, bone)
                points = fcurve.keyframe_points
                points.add(len(times))
                points.foreach_set("co", np.stack([times, residual[:, c] * scale],
                                                  axis=1).ravel())
                points.foreach_set("interpolation", np.full(len(times), _LINEAR, np.int32))
                fcurve.update()
            self._finish_strip(obj, track, action, first, "ADD", float(weight))
        return LayerHandle(track.name, "additive", token=(obj.name, track.name, action.name))

    def write_sparse(self, keys: Mapping[str, tuple[np.ndarray, np.ndarray]], layer: str,
                     weight: float) -> LayerHandle:
        """Each channel's few keys (host frames, engine units) as a linear F-curve (constant
        extrapolation) in a new action on an Add strip that holds its ends, so every channel
        holds its first and last key's value outside its keys."""
        sparse = sparse_keys(keys)
        channels = list(sparse)
        targets = self._targets(channels, None)
        obj = self.object()
        first = int(min(sparse[channels[c]][0][0] for c, *_ in targets))
        with host_step(f"creating the NLA track of layer {layer!r}"):
            action, track, _data = self._new_layer(obj, layer, "additive", first)
        with host_step(f"writing the corrective curves of layer {action.name!r}"):
            bag = _Channels(action, obj)
            for c, bone, prop, index in targets:
                scale = np.pi / 180.0 if prop == "rotation_euler" else 1.0
                frames, values = sparse[channels[c]]
                fcurve = bag.new(data_path(bone, prop), index, bone)
                points = fcurve.keyframe_points
                points.add(len(frames))
                points.foreach_set("co", np.stack([frames, values * scale], axis=1).ravel())
                points.foreach_set("interpolation", np.full(len(frames), _LINEAR, np.int32))
                fcurve.extrapolation = "CONSTANT"
                fcurve.update()
            self._finish_strip(obj, track, action, first, "ADD", float(weight), "HOLD")
        return LayerHandle(track.name, "additive", token=(obj.name, track.name, action.name))

    def remove_layer(self, handle: LayerHandle) -> None:
        """Delete the layer's track and action; when no layer of this tool is left, put the
        pushed-down original back as the active action."""
        object_name, track_name, action_name = cast(tuple[str, str, str], handle.token)
        with host_step(f"deleting layer {handle.name!r}"):
            obj = bpy.data.objects.get(object_name)
            if obj is None or obj.animation_data is None:
                return
            data = obj.animation_data
            action = bpy.data.actions.get(action_name)
            if action is None or MADE not in action:
                return  # not ours (any more): nothing of the user's is touched
            track = _track_of(data, track_name, action)
            if track is not None:
                data.nla_tracks.remove(track)
            pushed = tuple(action.get(key) for key in PUSH_RECORD)
            bpy.data.actions.remove(action)
            note = _restore_original(obj, pushed)
            if note:
                self.notes.append(note)

    def layers(self, edits: bool = True) -> list[LayerHandle]:
        """The layers this tool made on the armature (found in the file, so they survive undo,
        saving and reloading), bottom to top; without ``edits``, none of a propagated edit's
        (the artist's, which a replacing Apply keeps)."""
        obj = self.object()
        data = obj.animation_data
        if data is None:
            return []
        return [LayerHandle(t.name, "additive" if s.action[MADE] == EDIT else str(s.action[MADE]),
                            token=(obj.name, t.name, s.action.name))
                for t in data.nla_tracks for s in t.strips
                if s.action is not None and MADE in s.action
                and (edits or s.action[MADE] != EDIT)]

    def pushed_down(self) -> bool:
        """Whether Apply moved the armature's original action onto an NLA track of its own
        that has not been put back."""
        return PUSHED in self.object()

    def restore_original(self) -> None:
        """Put the pushed-down original back as the active action if no layer of this tool is
        left (the user deleted them in the NLA editor: Remove had nothing to delete and left
        the armature with no active action). Call inside :meth:`undo_chunk`."""
        with host_step("making the original action active again"):
            note = _restore_original(self.object())
        if note:
            self.notes.append(note)

    @contextmanager
    def undo_chunk(self, label: str) -> Iterator[None]:
        """One undo step (``ed.undo_push`` after the block); if the block raises, what it made
        is deleted again and nothing is pushed. The host's notes are the block's from then on
        (the read's had gone with the analysis, and were said again after Apply)."""
        self.notes = []
        self._journal = journal = _Journal()
        try:
            yield
        except BaseException:
            self._journal = None
            _roll_back(journal)
            raise
        self._journal = None
        if self.undo_push:
            with host_step("pushing the undo step"):
                bpy.ops.ed.undo_push(message=label)

    # ------------------------------------------------------------------ preview
    def preview_keyframes(self, frames: Sequence[int],
                          labels: Sequence[str] | None = None) -> None:
        """Timeline markers ``SP key 1001`` / ``SP breakdown 1043`` (markers cannot be
        coloured; the name tells the two kinds apart)."""
        self.clear_preview()
        markers = self.scene.timeline_markers
        for i, frame in enumerate(frames):
            kind = labels[i] if labels is not None else "keypose"
            word = "breakdown" if kind == "breakdown" else "key"
            markers.new(f"{MARKER}{word} {int(frame)}", frame=int(frame))

    def clear_preview(self) -> None:
        markers = self.scene.timeline_markers
        for marker in [m for m in markers if _previewing(m)]:
            markers.remove(marker)

    def preview(self) -> list[tuple[int, str]]:
        """(frame, name) of the preview markers, by frame."""
        return sorted((m.frame, m.name) for m in self.scene.timeline_markers if _previewing(m))


def _set_mute(track: Any, on: bool) -> None:
    track.mute = on


def _previewing(marker: Any) -> bool:
    """Whether a timeline marker is one of the preview's: named as it names them, at the
    frame its name says (a marker cannot hold a property; a user's "SP 010 start" was
    deleted with the preview's)."""
    word, _, frame = marker.name[len(MARKER):].partition(" ")
    return marker.name.startswith(MARKER) and word in ("key", "breakdown") \
        and frame == str(marker.frame)


_LINEAR = 1  # index of LINEAR in Keyframe.interpolation's enum (CONSTANT, LINEAR, BEZIER, ...)


def _slotted() -> bool:
    """Blender 4.4+ keeps F-curves in slotted channel bags (``action.fcurves`` is a proxy for the
    first slot until 5.0 removes it)."""
    return tuple(bpy.app.version) >= (4, 4, 0)


def _action_fcurves(action: Any, data: Any) -> list[Any]:
    """F-curves of an action: its slotted channel bag (Blender 4.4+) or ``action.fcurves``."""
    if _slotted() and len(action.layers):
        slot = getattr(data, "action_slot", None) if data is not None else None
        found = []
        for layer in action.layers:
            for strip in layer.strips:
                for bag in strip.channelbags:
                    if slot is None or bag.slot == slot:
                        found.extend(bag.fcurves)
        return found
    return list(action.fcurves)


class _Channels:
    """Creates F-curves in a new action, grouped by bone: through a slot, layer, strip and
    channel bag where Blender has them (4.4+), else through ``action.fcurves`` (4.2, 4.3)."""

    def __init__(self, action: Any, obj: Any | None) -> None:
        self.action = action
        self.bag = None
        if _slotted() and obj is not None:
            slot = action.slots.new(id_type="OBJECT", name=obj.name)
            strip = action.layers.new("Layer").strips.new(type="KEYFRAME")
            self.bag = strip.channelbag(slot, ensure=True)

    @classmethod
    def existing(cls, action: Any) -> _Channels:
        """The channels of an action that has F-curves already (its first slot's)."""
        made = cls(action, None)
        if _slotted() and len(action.layers) and len(action.slots):
            made.bag = action.layers[0].strips[0].channelbag(action.slots[0], ensure=True)
        return made

    def remove(self, path: str, index: int) -> None:
        curves = self.bag.fcurves if self.bag is not None else self.action.fcurves
        found = curves.find(path, index=index)
        if found is not None:
            curves.remove(found)

    def new(self, path: str, index: int, group: str) -> Any:
        if self.bag is None:
            return self.action.fcurves.new(path, index=index, action_group=group)
        fcurve = self.bag.fcurves.new(path, index=index)
        # looked up each time, never kept: removing F-curves can delete a group that became
        # empty, and a kept Python reference to it would then point at freed memory
        groups = self.bag.groups
        fcurve.group = groups.get(group) or groups.new(group)
        return fcurve


def _constant_influence(strip: Any, influence: float, frame: int) -> None:
    """Give ``strip`` the constant ``influence`` (a strip's own influence is ignored unless
    it is made animatable, and Blender keys it when it is: the key at ``frame`` holds it)."""
    if influence != 1.0:
        strip.use_animated_influence = True
        strip.influence = influence
        strip.keyframe_insert("influence", frame=frame)


def _restore_original(obj: Any, pushed: tuple[Any, ...] = (None, None, None)) -> str | None:
    """Put the pushed-down action back once no layer of this tool is left on ``obj``.

    Where it went (its track's and its action's names, and whether it was alone: see
    :data:`PUSH_RECORD`) is read from ``obj``, else from ``pushed``, the last layer's record
    of it. A push-down that failed before it took the action off (a rolled-back Apply) is
    undone by deleting its track.

    An action the user made active meanwhile (keys set after Apply go into a new action) is
    kept: the original stays on its NLA track below it, and the returned note says so (making
    the original active again left the user's action with no user, lost on saving).
    """
    data = obj.animation_data
    track_name = obj.get(PUSHED, pushed[0])
    if data is None or track_name is None:
        return None
    ours = [t for t in data.nla_tracks for s in t.strips
            if s.action is not None and MADE in s.action]
    if ours:
        return None
    original = bpy.data.actions.get(obj.get(PUSHED_ACTION, pushed[1]) or "")
    alone = bool(obj.get(PUSHED_ALONE, pushed[2]))
    track = _track_of(data, track_name, original)
    for key in PUSH_RECORD:
        if key in obj:
            del obj[key]
    if track is None or not len(track.strips):
        return None
    strip = track.strips[0]
    action, slot = strip.action, getattr(strip, "action_slot", None)
    if data.action is not None and data.action == action:  # (never taken off)
        data.nla_tracks.remove(track)
        return None
    if data.action is not None:
        return (f"kept {data.action.name!r}, the active action made after Apply, and left the "
                f"original {action.name if action else '(none)'!r} on NLA track "
                f"{track.name!r} under it")
    if not alone:
        # the blending it had, which its strip kept (the animation data's may have changed
        # since); alone, the data's own were left as the user set them
        data.action_blend_type = strip.blend_type
        data.action_extrapolation = strip.extrapolation
        data.action_influence = strip.influence if strip.use_animated_influence else 1.0
    data.nla_tracks.remove(track)
    data.action = action
    if slot is not None and hasattr(data, "action_slot"):
        data.action_slot = slot
    return None


def _track_of(data: Any, name: str, action: Any, empty: bool = False) -> Any:
    """The NLA track named ``name`` that plays ``action`` (any track of that name if
    ``action`` is None, as files written before the action was recorded say), or with
    ``empty`` one of that name with no strip yet (a failed Apply's, made just before); else
    None."""
    for track in data.nla_tracks:
        if track.name == name and (action is None or any(
                s.action == action for s in track.strips)):
            return track
    if empty:
        for track in data.nla_tracks:
            if track.name == name and not len(track.strips):
                return track
    return None


def _free_track_name(data: Any, wanted: str) -> str:
    """``wanted``, or ``wanted.001``, ``wanted.002``... if a track of ``data`` has it (Blender
    lets tracks share a name; this tool finds its tracks by theirs)."""
    taken = {t.name for t in data.nla_tracks}
    name, n = _fitting(wanted, NAME_BYTES), 0
    while name in taken:  # (the suffix kept within Blender's length: cut, it was lost)
        n += 1
        suffix = f".{n:03d}"
        name = _fitting(wanted, NAME_BYTES - len(suffix)) + suffix
    return name


def _fitting(text: str, size: int) -> str:
    """The longest start of ``text`` of at most ``size`` bytes in UTF-8 (whole characters)."""
    return text.encode("utf-8")[:size].decode("utf-8", errors="ignore")


def _roll_back(journal: _Journal) -> None:
    """Delete what a failed undo chunk made (tracks, actions) and undo its push-down."""
    for object_name, track_name, action_name in reversed(journal.tracks):
        obj = bpy.data.objects.get(object_name)
        if obj is not None and obj.animation_data is not None:
            # by its action too: a user's track may have the name (see _free_track_name)
            track = _track_of(obj.animation_data, track_name,
                              bpy.data.actions.get(action_name), empty=True)
            if track is not None:
                obj.animation_data.nla_tracks.remove(track)
    for name in journal.actions:
        action = bpy.data.actions.get(name)
        if action is not None:
            bpy.data.actions.remove(action)
    for object_name, _track, _action in journal.pushed:
        obj = bpy.data.objects.get(object_name)
        if obj is not None:
            _restore_original(obj)


def _left_alone(pose_bone: Any, prop: str, index: int) -> str | None:
    """Why Apply leaves a bone's channel alone (its reason in ``skipped``), or None: a
    connected bone's location, which Blender ignores (its FBX importer keys it), or a lock."""
    if prop == "location" and pose_bone.bone.use_connect:
        return CONNECTED
    lock = pose_bone.lock_location if prop == "location" else pose_bone.lock_rotation
    return "locked" if lock[index] else None


def _scaled(obj: Any, nodes: Sequence[str], scale: np.ndarray, order: Mapping[str, int]
            ) -> list[tuple[str, str]]:
    """The bones among ``nodes`` and above them whose pose scale (``scale``, per frame and
    bone, as read) leaves 1 on some frame, each with its factor ("2x"; "0.5x to 3x" where it
    varies over the axes or frames): Blender scales what is below them, the engine's
    kinematics does not."""
    bones = obj.data.bones
    named = dict.fromkeys(nodes)
    for name in nodes:
        named.update(dict.fromkeys(a.name for a in bones[name].parent_recursive))
    found = []
    for name in named:
        factors = np.abs(scale[:, order[name]])
        if factors.size and np.abs(factors - 1.0).max() > SCALE_TOLERANCE:
            grow, shrink = float(factors.max()), float(factors.min())
            found.append((name, f"{grow:.3g}x" if grow - shrink <= SCALE_TOLERANCE
                          else f"{shrink:.3g}x to {grow:.3g}x"))
    return found


def _keyed_span(obj: Any) -> tuple[int, int] | None:
    """Whole frames from the first to the last key of the active action and the playing NLA
    strips; None without animation."""
    data = obj.animation_data
    if data is None:
        return None
    # the keys (a manual frame range is not what plays: the keys around it were said to be
    # its ends), and a strip's within the strip
    ends = [tuple(data.action.curve_frame_range)] if data.action is not None else []
    ends += [_strip_keys(strip) for track in data.nla_tracks
             if not track.mute for strip in track.strips if strip.action is not None]
    if not ends:
        return None
    return math.floor(min(e[0] for e in ends)), math.ceil(max(e[1] for e in ends))


def _strip_keys(strip: Any) -> tuple[float, float]:
    """The frames of an NLA strip from its action's first key to its last (the strip's own
    frames where it repeats or plays backwards, or where no key is inside it)."""
    if strip.repeat != 1.0 or strip.use_reverse:
        return strip.frame_start, strip.frame_end
    first, last = strip.action.curve_frame_range
    start, end = strip.action_frame_start, strip.action_frame_end
    if last < start or first > end:
        return strip.frame_start, strip.frame_end
    return (strip.frame_start + (max(first, start) - start) * strip.scale,
            strip.frame_start + (min(last, end) - start) * strip.scale)


def _soloed(data: Any) -> str | None:
    """The name of the NLA track soloed in ``data`` (Blender then plays it alone), if any."""
    return next((track.name for track in data.nla_tracks if track.is_solo), None)


def _not_a_number(obj: Any) -> list[tuple[Any, float]]:
    """(F-curve, frame) of every key of the armature's active action whose value is not a
    number, the first of each F-curve."""
    data = obj.animation_data
    if data is None or data.action is None:
        return []
    found = []
    for fcurve in _action_fcurves(data.action, data):
        points = fcurve.keyframe_points
        co = np.empty(2 * len(points), dtype=np.float32)
        points.foreach_get("co", co)
        bad = np.flatnonzero(~np.isfinite(co[1::2]))
        if len(bad):
            found.append((fcurve, float(co[2 * bad[0]])))
    return found


def _rest_points(obj: Any, world: np.ndarray) -> np.ndarray | None:
    """(n, 3) float64: the bones' heads and the leaf bones' tails at rest, turned as the
    object's ``world`` matrix turns them (no offset); None for an armature of one bone."""
    bones = obj.data.bones
    if len(bones) < 2:
        return None
    points = [b.head_local for b in bones] + [b.tail_local for b in bones if not b.children]
    return np.asarray(points, dtype=np.float64) @ world[:3, :3].T


def _lying(obj: Any, world: np.ndarray) -> str | None:
    """A note when the armature's rest pose is less than half as tall (along the world's Z,
    which the millimetres take as the character's height) as it is wide or deep: a rig
    turned on its side had its errors said up to 5.6 times too large, and its K too high."""
    points = _rest_points(obj, world)
    if points is None:
        return None
    extent = np.ptp(points, axis=0)
    if extent[2] >= 0.5 * extent.max():
        return None
    return (f"armature {obj.name!r} stands {extent[2]:.3g} units tall along the world's Z at "
            f"rest but spans {extent.max():.3g}: the errors in mm take its height along Z as "
            "1.7 m, so they are said too large if it lies on its side; stand it up (its "
            "object rotation) for mm that mean what they say")


def _height(obj: Any, world: np.ndarray) -> float | None:
    """The whole armature's rest height in scene units (bone heads and leaf tails along the
    world's Z), as a clip of every bone measures it; None when it has none (one bone)."""
    points = _rest_points(obj, world)
    if points is None:  # a bone's length is no body's size (as a clip of one joint says)
        return None
    extent = float(np.ptp(points[:, 2]))
    return extent if extent > 1e-9 else None
