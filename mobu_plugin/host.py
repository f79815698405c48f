"""MobuHost: the Host protocol over ``pyfbsdk`` (MotionBuilder 2025+).

Every call is backed by a line of ``tests/fake_mobu/FACTS.md`` (Autodesk's documentation or
public code making the same call). In short:

- **Time** is built from frames exactly: ``frame × ticks per frame`` of the transport's time
  mode (``FBTime(0, 0, 0, 1, 0, mode).Get()``), never from float seconds, so keys land on the
  frame at 29.97, 30, 120 fps alike; a custom rate rounds each frame to the nearest tick.
- **Reading** evaluates the BaseAnimation FCurves of ``Translation``/``Rotation``
  (``FBFCurve.Evaluate``) and computes world positions with the engine's forward kinematics from
  each model's rest transform (``RotationOrder``; ``PreRotation``/``PostRotation`` when
  ``RotationActive``). At a few sampled frames the scene is evaluated (``Goto`` + ``Evaluate``)
  and its local values and world positions are compared with ours: a model whose values differ
  (a constraint, relation, IK or character input drives it; or other layers are playing) is read
  by evaluating the scene on every frame, and the status line says so; a model whose world
  position differs although its values agree uses a transform this tool does not model, which is
  an error naming it.
- **Writing** creates a layer, makes it current, and keys each curve with one ``KeysAdd``
  (interpolation and tangent mode per key) inside ``EditBegin``/``EditEnd``, then sets the
  tangents per key: unified and weighted keys are ``User`` (one slope), broken and smooth keys
  ``Break``; weighted keys get their tangent weights; clamping is off everywhere.
- **Undo**: an Apply runs inside one ``FBUndoManager`` transaction when none is open; whatever
  fails, every created layer is removed and every property this tool made animated is made
  unanimated again (all or nothing).
- **Layers** compose rotations per layer (quaternions) by default and
  ``FBAnimationLayer.LayerRotationMode`` is read only, so the residual layer holds each joint's
  turn from the reduced to the original pose (R_reduced⁻¹ · R_original); translations are per
  channel. The corrective layer holds a few Linear keys per channel (constant extrapolation);
  in a per-layer rotation layer a corrected joint's rotation keys are the turn from the pose
  below to the corrected one at the union of its key frames (exact there, linear between).

``pyfbsdk`` is imported lazily so that ``import mobu_plugin`` works outside MotionBuilder.
"""

from __future__ import annotations

import time as _time
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from fractions import Fraction
from typing import TYPE_CHECKING, Any, ClassVar

import numpy as np
from scipy.spatial.transform import Rotation

from sp_core.clip import Clip
from sp_core.curves import KeyedCurves
from sp_core.errors import ClipError
from sp_core.euler import unwrap_euler_from
from sp_core.host import (
    HostError,
    LayerHandle,
    LazyModule,
    ended_at_zero,
    height_unread,
    host_step,
    in_parent_frame,
    muted,
    sparse_keys,
)
from sp_core.tangents import to_mobu

if TYPE_CHECKING:  # mypy checks every call against motionbuilder-stubs
    import pyfbsdk as fb
else:
    fb = LazyModule("pyfbsdk")

#: ``FBModelRotationOrder`` value → the engine's Euler order (``kFBEulerXYZ`` rotates about X
#: first: R = Rz·Ry·Rx, scipy's intrinsic "ZYX").
ROTATE_ORDERS = {0: "ZYX", 1: "YZX", 2: "XZY", 3: "ZXY", 4: "YXZ", 5: "XYZ"}
PROPERTIES = {"position": "Translation", "rotation": "Rotation"}
#: Tangent mode of the fitted keys: one slope (User) or two (Break).
ONE_SLOPE = ("unified", "weighted")
MARK = "SalientPoses"
MARK_COLOURS = {"keypose": (0.96, 0.70, 0.42), "breakdown": (0.43, 0.66, 0.86)}
#: Frames at which the scene is evaluated to check the curves and the forward kinematics.
SAMPLES = 5
#: Agreement of curve values with the scene's (degrees / scene units) and of world positions.
VALUE_TOLERANCE = 1e-4
POSITION_TOLERANCE = 1e-3


class Cancelled(HostError):
    """The user pressed Esc during a long read or Apply."""


@dataclass(frozen=True)
class Clock:
    """Frames ↔ ticks at the transport rate.

    Attributes
    ----------
    fps : float
        Frames per second.
    per_frame : int
        Ticks per frame for a standard time mode; 0 for a custom rate.
    per_second : int
        Ticks per second.
    """

    fps: float
    per_frame: int
    per_second: int

    def ticks(self, frame: float) -> int:
        """Ticks of ``frame`` (whole frames exactly; fractions and custom rates rounded)."""
        if self.per_frame and float(frame).is_integer():
            return int(frame) * self.per_frame
        rate = Fraction(self.per_second, self.per_frame) if self.per_frame \
            else Fraction(self.fps).limit_denominator(1001000)
        return round(Fraction(frame) * self.per_second / rate)

    def frame(self, ticks: int) -> int:
        """The nearest whole frame."""
        if self.per_frame:
            return int(round(Fraction(ticks, self.per_frame)))
        return int(round(ticks * self.fps / self.per_second))


@dataclass
class _Node:
    """What reading needs of one model."""

    name: str
    model: fb.FBModel
    order: str
    pre: np.ndarray  # (3, 3) pre-rotation (identity unless RotationActive)
    post: np.ndarray  # (3, 3) post-rotation (identity unless RotationActive)
    static: dict[str, list[float]]  # property → its value when not animated


class MobuHost:
    """The current MotionBuilder scene (current take) as a Salient Poses host.

    Attributes
    ----------
    skipped : dict of str to str
        Animated channels Apply leaves alone, with the reason (locked).
    notes : list of str
        Sentences for the status line about the last read or write.
    driven : dict of str to str
        Models read by evaluating the scene because something other than their curves drives
        them; Apply refuses to key them.
    progress_after : float
        Seconds after which a long read or write shows a progress bar (Esc cancels).
    """

    name = "MotionBuilder"
    #: The names of the reduction layers written in this MotionBuilder session, by any
    #: MobuHost (the tool's, a batch's): an Analyze reads the motion under them.
    _made: ClassVar[set[str]] = set()
    progress_after = 1.0

    def __init__(self) -> None:
        self.skipped: dict[str, str] = {}
        self.notes: list[str] = []
        self.driven: dict[str, str] = {}
        self._read: tuple[int, dict[str, np.ndarray]] = (0, {})
        self._created: list[fb.FBAnimationLayer] = []
        self._animated: list[fb.FBPropertyAnimatableVector3d] = []

    # ------------------------------------------------------------------ time
    def clock(self) -> Clock:
        """The transport's rate as ticks per frame."""
        with host_step("reading the transport frame rate"):
            player = fb.FBPlayerControl()
            mode = player.GetTransportFps()
            fps = float(player.GetTransportFpsValue())
            per_second = int(fb.FBTime.OneSecond.Get())
            if mode == fb.FBTimeMode.kFBTimeModeCustom:
                return Clock(fps, 0, per_second)
            return Clock(fps, int(fb.FBTime(0, 0, 0, 1, 0, mode).Get()), per_second)

    @property
    def fps(self) -> float:
        with host_step("reading the transport frame rate"):
            return float(fb.FBPlayerControl().GetTransportFpsValue())

    def time_of(self, frame: float, clock: Clock | None = None) -> fb.FBTime:
        """An ``FBTime`` exactly on ``frame`` at the transport rate."""
        return fb.FBTime((clock or self.clock()).ticks(frame))

    def playback_range(self) -> tuple[int, int]:
        clock = self.clock()
        with host_step("reading the take's time span"):
            span = fb.FBSystem().CurrentTake.LocalTimeSpan
            return clock.frame(span.GetStart().Get()), clock.frame(span.GetStop().Get())

    def current_frame(self) -> int:
        clock = self.clock()
        with host_step("reading the current time"):
            return clock.frame(fb.FBSystem().LocalTime.Get())

    def set_current_frame(self, frame: int) -> None:
        with host_step(f"going to frame {frame}"):
            fb.FBPlayerControl().Goto(self.time_of(frame))

    # ------------------------------------------------------------------ scene structure
    def _model(self, name: str) -> fb.FBModel:
        model = fb.FBFindModelByLabelName(name)
        if model is None:
            raise HostError(f"finding model {name!r}: not in the scene")
        return model

    def selected_nodes(self) -> list[str]:
        with host_step("reading the selection"):
            models = fb.FBModelList()
            fb.FBGetSelectedModels(models)
            return [m.LongName for m in models]

    def hierarchy(self, roots: Sequence[str]) -> list[tuple[str, str | None]]:
        with host_step("reading the hierarchy"):
            if not roots:
                roots = [m.LongName for m in fb.FBSystem().Scene.RootModel.Children]
            listed = set(roots)
            result: list[tuple[str, str | None]] = []
            seen: set[str] = set()
            for root in roots:
                model = self._model(root)
                above = model.Parent
                while above is not None and above.LongName not in listed:
                    above = above.Parent
                if above is not None:  # under another selected model: read with it
                    continue
                queue: list[tuple[Any, str | None]] = [(model, None)]
                while queue:
                    model, parent = queue.pop(0)
                    if model.LongName in seen:
                        continue
                    seen.add(model.LongName)
                    result.append((model.LongName, parent))
                    queue.extend((child, model.LongName) for child in model.Children)
            return result

    @contextmanager
    def _scene_at(self) -> Iterator[Any]:
        """Yield ``visit(frame)`` (go to the frame, evaluate the scene); restore the time."""
        player, scene = fb.FBPlayerControl(), fb.FBSystem().Scene
        start = fb.FBSystem().LocalTime
        clock = self.clock()

        def visit(frame: int) -> None:
            player.Goto(fb.FBTime(clock.ticks(frame)))
            scene.Evaluate()

        try:
            yield visit
        finally:
            player.Goto(start)
            scene.Evaluate()

    def world_positions(self, nodes: Sequence[str], frames: Sequence[int]) -> np.ndarray:
        """The scene's own world positions (``GetVector``), by evaluating it at each frame."""
        models = [self._model(n) for n in nodes]
        out = np.empty((len(frames), len(nodes), 3))
        vector = fb.FBVector3d()
        what = fb.FBModelTransformationType.kModelTranslation
        with host_step("reading world positions"), self._scene_at() as visit, \
                self._progress("Salient Poses: reading world positions", len(frames)) as step:
            for i, frame in enumerate(frames):
                step(i)
                visit(int(frame))
                for j, model in enumerate(models):
                    model.GetVector(vector, what, True)
                    out[i, j] = [vector[0], vector[1], vector[2]]
        return out

    def animated_channels(self, nodes: Sequence[str]) -> list[str]:
        result: list[str] = []
        for node in nodes:
            model = self._model(node)
            for kind in PROPERTIES:
                prop = _property(model, kind)
                if prop.IsAnimated():
                    result.extend(f"{node}.{'XYZ'[a]}{kind}" for a in range(3)
                                  if not (prop.IsLocked() or prop.IsMemberLocked(a)))
        return result

    # ------------------------------------------------------------------ reading
    @staticmethod
    def _split(channel: str) -> tuple[str, str, int]:
        node, _, attribute = channel.rpartition(".")
        return node, attribute[1:], "XYZ".index(attribute[0])

    def _describe(self, name: str) -> _Node:
        with host_step(f"reading the transform of {name}"):
            model = self._model(name)
            order = ROTATE_ORDERS.get(int(model.RotationOrder))
            if order is None:
                raise HostError(f"reading {name}.RotationOrder: spheric XYZ is not supported; "
                                "choose an Euler rotation order")
            scaling = model.Scaling
            if model.Children and (scaling.IsAnimated()
                                   or any(abs(scaling.Data[a] - 1.0) > 1e-9 for a in range(3))):
                raise HostError(f"reading {name}.Scaling: scaled joints are not supported; "
                                "set Scaling to 1 1 1 (and remove its keys)")
            pre = post = np.eye(3)
            if model.RotationActive:  # pre/post rotations count only then (always XYZ order)
                pre = _xyz([model.PreRotation[a] for a in range(3)])
                post = _xyz([model.PostRotation[a] for a in range(3)])
            static = {kind: [float(_property(model, kind).Data[a]) for a in range(3)]
                      for kind in PROPERTIES}
            return _Node(name, model, order, pre, post, static)

    def _curve_values(self, nodes: list[_Node], channels: list[str], frames: Sequence[int],
                      clock: Clock) -> np.ndarray:
        """(n_frames, n_channels): the BaseAnimation curves evaluated on every frame (a channel
        without keys holds its property's value)."""
        index = {n.name: n for n in nodes}
        times = [fb.FBTime(clock.ticks(f)) for f in frames]
        out = np.empty((len(frames), len(channels)))
        take = fb.FBSystem().CurrentTake
        current = take.GetCurrentLayer()
        take.SetCurrentLayer(0)  # GetAnimationNode answers for the current layer
        try:
            animation: dict[tuple[str, str], fb.FBAnimationNode | None] = {}
            with self._progress("Salient Poses: reading curves", len(channels)) as step:
                for c, channel in enumerate(channels):
                    step(c)
                    node, kind, axis = self._split(channel)
                    key = (node, kind)
                    if key not in animation:
                        prop = _property(index[node].model, kind)
                        animation[key] = prop.GetAnimationNode() if prop.IsAnimated() else None
                    node_animation = animation[key]
                    curve = None if node_animation is None else node_animation.Nodes[axis].FCurve
                    if curve is None or not len(curve.Keys):
                        out[:, c] = index[node].static[kind][axis]
                        continue
                    evaluate = curve.Evaluate
                    out[:, c] = [evaluate(t) for t in times]
        finally:
            take.SetCurrentLayer(current)
        return out

    def _scene_samples(self, nodes: list[_Node], channels: list[str], frames: Sequence[int],
                       carriers: Sequence[Any] = (), frame_of: Sequence[int] = ()
                       ) -> tuple[np.ndarray, np.ndarray]:
        """The scene's local channel values (n_frames, n_channels) and positions
        (n_frames, n_nodes, 3) at ``frames``, by evaluating it there: world positions, or with
        ``carriers`` (models) and ``frame_of`` (per node, an index into them or -1 for the
        world) in that carrier's global frame."""
        index = {n.name: i for i, n in enumerate(nodes)}
        values = np.empty((len(frames), len(channels)))
        positions = np.empty((len(frames), len(nodes), 3))
        vector = fb.FBVector3d()
        matrix = fb.FBMatrix()
        what = fb.FBModelTransformationType.kModelTranslation
        whole = fb.FBModelTransformationType.kModelTransformation
        with self._scene_at() as visit, \
                self._progress("Salient Poses: evaluating the scene", len(frames)) as step:
            for i, frame in enumerate(frames):
                step(i)
                visit(int(frame))
                data: dict[tuple[str, str], fb.FBVector3d] = {}
                for c, channel in enumerate(channels):
                    node, kind, axis = self._split(channel)
                    if (node, kind) not in data:
                        data[node, kind] = _property(nodes[index[node]].model, kind).Data
                    values[i, c] = data[node, kind][axis]
                for j, node_info in enumerate(nodes):
                    node_info.model.GetVector(vector, what, True)
                    positions[i, j] = [vector[0], vector[1], vector[2]]
                for c, carrier in enumerate(carriers):
                    carrier.GetMatrix(matrix, whole, True)
                    pose = np.array([matrix[k] for k in range(16)]).reshape(4, 4).T  # (stored
                    # column-major)
                    inside = [j for j, f in enumerate(frame_of) if f == c]
                    positions[i, inside] = in_parent_frame(positions[i, inside], pose)
        return values, positions

    @contextmanager
    def _without(self, names: Iterable[str]) -> Iterator[None]:
        """The take's layers named ``names`` muted (those not muted already) for the block,
        then as they were: a muted layer "is not included in the result animation"."""
        take = fb.FBSystem().CurrentTake
        wanted = set(names)
        layers = [layer for layer in (take.GetLayer(i) for i in range(1, take.GetLayerCount()))
                  if layer.Name in wanted and not layer.Mute]
        with muted(layers, _set_mute):
            yield

    def _other_layers(self) -> list[str]:
        take = fb.FBSystem().CurrentTake
        return [take.GetLayer(i).Name for i in range(1, take.GetLayerCount())
                if not take.GetLayer(i).Mute]

    def motion(self, roots: Sequence[str], first: int, last: int) -> Clip:
        """The models under ``roots`` over ``first..last``: Translation and Rotation (degrees)
        as channels, rotation orders and pre/post rotations (see the module notes), read
        without the reduction layers written in this MotionBuilder session (an Analyze after
        Apply analyses the motion, not its reduction; a propagated edit is read)."""
        with self._without(self._made):
            return self._motion(roots, first, last)

    def _motion(self, roots: Sequence[str], first: int, last: int) -> Clip:
        clock = self.clock()
        parents_of = dict(self.hierarchy(roots))
        nodes = [self._describe(name) for name in parents_of]
        index = {n.name: i for i, n in enumerate(nodes)}
        self.skipped.clear()
        self.driven.clear()
        self.notes = []
        channels: list[str] = []  # every local value is checked against the scene
        animated_any = False
        for node in nodes:
            channels += [f"{node.name}.{a}position" for a in "XYZ"]
            channels += [f"{node.name}.{a}rotation" for a in node.order]
            for kind in PROPERTIES:
                prop = _property(node.model, kind)
                if not prop.IsAnimated():
                    continue
                animated_any = True
                for a in range(3):
                    if prop.IsLocked() or prop.IsMemberLocked(a):
                        self.skipped[f"{node.name}.{'XYZ'[a]}{kind}"] = "locked"
        if not animated_any:
            raise HostError(f"reading {', '.join(roots)}: no Translation or Rotation under it "
                            "is animated in the current take; select the animated skeleton")
        frames = list(range(first, last + 1))
        with host_step("reading the animation curves"):
            values = self._curve_values(nodes, channels, frames, clock)
        rows = sorted({round(first + (last - first) * s / (SAMPLES - 1))
                       for s in range(SAMPLES)})
        # a selected model below the scene's top is read in its parent's frame (the clip's
        # roots are), as Maya reads a selected joint: keying the ancestors would move the body
        top_level = {m.LongName for m in fb.FBSystem().Scene.RootModel.Children}
        carriers: list[Any] = []
        frame_of: list[int] = []
        for node in nodes:
            parent = parents_of[node.name]
            if parent is not None:
                frame_of.append(frame_of[index[parent]])
            elif node.name in top_level or node.model.Parent is None:
                frame_of.append(-1)
            else:
                frame_of.append(len(carriers))
                carriers.append(node.model.Parent)
        with host_step("evaluating the scene at sampled frames"):
            scene_values, scene_positions = self._scene_samples(nodes, channels, rows,
                                                                carriers, frame_of)
        sample_rows = [f - first for f in rows]
        differs = np.abs(_angle_aware(values[sample_rows] - scene_values, channels))
        layers = self._other_layers()
        for node in nodes:
            columns = [c for c, ch in enumerate(channels) if ch.startswith(node.name + ".")]
            if layers:
                self.driven[node.name] = "layers"
            elif differs[:, columns].max() > VALUE_TOLERANCE:
                self.driven[node.name] = "driven"
        if self.driven:
            names = [n for n in (nd.name for nd in nodes) if n in self.driven]
            columns = [c for c, ch in enumerate(channels) if self._split(ch)[0] in self.driven]
            with host_step(f"evaluating the scene on every frame for {', '.join(names[:3])}"):
                dense, _ = self._scene_samples([nodes[index[n]] for n in names],
                                               [channels[c] for c in columns], frames)
            values[:, columns] = dense
            if layers:
                self.notes.append(f"Read the result of the layers {', '.join(layers)} by "
                                  "evaluating the scene on every frame (slow on long takes).")
            else:
                self.notes.append(
                    f"{len(names)} model(s) ({', '.join(names[:3])}"
                    f"{', ...' if len(names) > 3 else ''}) are driven by a constraint, "
                    "relation, IK or character input: read by evaluating the scene on every "
                    "frame; Apply will not key them.")
                rigs = [c.LongName for c in fb.FBSystem().Scene.Characters if c.ActiveInput]
                if rigs:
                    self.notes.append(f"Character {', '.join(rigs)} has its input active (a "
                                      "control rig or another source drives the skeleton): "
                                      "plot it to the skeleton and turn the input off to "
                                      "reduce the skeleton itself.")
        # a translation that does not move stays in the rest offset (where a parent's
        # post-rotation is folded in); rotations are channels always
        keep = [c for c, ch in enumerate(channels) if ch.endswith("rotation")
                or _property(nodes[index[self._split(ch)[0]]].model, "position").IsAnimated()
                or self._split(ch)[0] in self.driven]
        channels, values = [channels[c] for c in keep], values[:, keep]
        clip = self._clip(nodes, parents_of, channels, values, clock, first, roots,
                          self._character_height(carriers, top_level, clock, first))
        fk = clip.forward_kinematics(values[sample_rows])
        error = np.linalg.norm(fk - scene_positions, axis=-1).max(axis=0)
        bad = [nodes[j].name for j in range(len(nodes)) if error[j] > POSITION_TOLERANCE]
        if bad:
            raise HostError(f"reading {bad[0]}: its world position differs from this tool's "
                            f"forward kinematics by {error[index[bad[0]]]:.4g} units although "
                            "its channels agree; it uses a transform the tool does not model "
                            "(rotation/scaling pivots or offsets, inherited scaling)")
        # the residual's rotations need these values once our layers change the composite
        self._read = (first, dict(zip(channels, values.T, strict=True)))
        return clip

    def _character_height(self, carriers: Sequence[Any], top_level: set[str], clock: Clock,
                          first: int) -> float | None:
        """The height of the whole skeleton above ``carriers`` (scene units, measured as a clip
        of it measures it), so that a limb's errors are in the body's millimetres; None when
        nothing is carried (the clip is the whole skeleton) or the skeleton cannot be read."""
        tops: list[str] = []
        for model in carriers:
            while model.LongName not in top_level and model.Parent is not None:
                model = model.Parent
            tops.append(model.LongName)
        if not tops:
            return None
        with host_step("reading the whole skeleton's rest pose for its height"):
            try:
                whole = dict(self.hierarchy(list(dict.fromkeys(tops))))
                nodes = [self._describe(name) for name in whole]
                return self._clip(nodes, whole, [], np.zeros((1, 0)), clock, first,
                                  tops).height()
            except (HostError, ClipError) as exc:
                self.notes.append(height_unread(exc))
                return None

    def _clip(self, nodes: list[_Node], parents_of: dict[str, str | None], channels: list[str],
              values: np.ndarray, clock: Clock, first: int, roots: Sequence[str],
              height: float | None = None) -> Clip:
        """The engine's model: a parent's post-rotation (R_post⁻¹ after its rotation) is folded
        into each child's rest translation and pre-rotation. ``height``: the whole character's,
        when the models are part of it."""
        index = {n.name: i for i, n in enumerate(nodes)}
        offsets, orients, parents = [], [], []
        moving = {self._split(ch)[0] for ch in channels if ch.endswith("position")}
        for node in nodes:
            parent = parents_of[node.name]
            turn = np.eye(3) if parent is None else nodes[index[parent]].post.T
            if not np.allclose(turn, np.eye(3)) and node.name in moving:
                raise HostError(f"reading {node.name}.Translation: a moving translation under "
                                f"a parent with PostRotation ({parent}) is not supported")
            offsets.append(turn @ np.array(node.static["position"]))
            orients.append(turn @ node.pre)
            parents.append(-1 if parent is None else index[parent])
        return Clip([n.name for n in nodes], parents, np.array(offsets), [False] * len(nodes),
                    channels, values, clock.fps, first_frame=first, name=", ".join(roots),
                    orients=np.array(orients), character_height=height,
                    held_channels=list(self.skipped))  # (locked: Apply leaves them alone)

    def channel_values(self, channels: Sequence[str], first: int, last: int,
                       beneath: bool = False) -> np.ndarray:
        """(last − first + 1, n_channels): what the scene shows (all layers, or with
        ``beneath`` all but this host's reduction layers), from the curves when only
        BaseAnimation plays and nothing drives the models, else by evaluation."""
        if beneath:
            with self._without(self._made):
                return self.channel_values(channels, first, last)
        clock = self.clock()
        names = list(dict.fromkeys(self._split(c)[0] for c in channels))
        nodes = [self._describe(n) for n in names]
        frames = list(range(first, last + 1))
        with host_step("reading channel values"):
            if self._other_layers() or any(n in self.driven for n in names) \
                    or len(frames) <= SAMPLES:
                return self._scene_samples(nodes, list(channels), frames)[0]
            return self._curve_values(nodes, list(channels), frames, clock)

    # ------------------------------------------------------------------ progress
    @contextmanager
    def _progress(self, caption: str, total: int) -> Iterator[Any]:
        """Yield ``step(done)``: after ``progress_after`` seconds it shows an ``FBProgress`` bar
        and raises :class:`Cancelled` when the user holds Esc."""
        started = _time.monotonic()
        state: dict[str, Any] = {"bar": None}

        def step(done: int) -> None:
            bar = state["bar"]
            if bar is None:
                if _time.monotonic() - started < self.progress_after:
                    return
                bar = state["bar"] = fb.FBProgress()
                bar.Caption = caption
                bar.ProgressBegin()
            bar.Percent = int(100 * done / max(total, 1))
            if bar.UserRequestCancell():
                raise Cancelled(f"{caption}: cancelled (Esc)")

        try:
            yield step
        finally:
            if state["bar"] is not None:
                state["bar"].ProgressDone()

    # ------------------------------------------------------------------ layers
    def _new_layer(self, name: str, mode: fb.FBLayerMode, reduction: bool = True
                   ) -> tuple[fb.FBAnimationLayer, int]:
        """A new layer of the current take named ``name`` (numbered if taken); a
        ``reduction`` layer is left out of later reads of the motion, an edit's is not."""
        take = fb.FBSystem().CurrentTake
        existing = {take.GetLayer(i).Name for i in range(take.GetLayerCount())}
        unique, n = name, 2
        while unique in existing:
            unique, n = f"{name}{n}", n + 1
        take.CreateNewLayer()
        index = take.GetLayerCount() - 1
        layer = take.GetLayer(index)
        self._created.append(layer)
        layer.Name = unique
        if reduction:
            self._made.add(unique)
        layer.LayerMode = mode
        return layer, index

    def _layer_curves(self, node: str, kind: str) -> fb.FBAnimationNode:
        """The current layer's animation node of a property (animating it if needed)."""
        model = self._model(node)
        # (the documented way to put a model's keys on the undo stack, as Autodesk's
        # IndividualUndoCalls sample does before keying; a no-op without an open transaction)
        fb.FBUndoManager().TransactionAddModelTRS(model)
        prop = _property(model, kind)
        if not prop.IsAnimated():
            prop.SetAnimated(True)
            self._animated.append(prop)
        animation = prop.GetAnimationNode()
        if animation is None:
            raise HostError(f"{node}.{PROPERTIES[kind]} cannot be animated")
        return animation

    def _refuse_driven(self, channels: Sequence[str]) -> None:
        driven = sorted({n for n in (self._split(c)[0] for c in channels)
                         if self.driven.get(n) == "driven"})
        if driven:
            raise HostError(f"keying {driven[0]}: it is driven by a constraint, relation, IK or "
                            "character input, so keys in a layer would not show; plot it to "
                            "its own curves first (or analyse without it)")

    @contextmanager
    def _on_layer(self, index: int) -> Iterator[None]:
        take = fb.FBSystem().CurrentTake
        current = take.GetCurrentLayer()
        take.SetCurrentLayer(index)
        try:
            yield
        finally:
            take.SetCurrentLayer(current if current < take.GetLayerCount() else 0)

    def write_curves(self, curves: KeyedCurves, layer: str,
                     replacing: Sequence[LayerHandle] = ()) -> LayerHandle:
        """The reduced curves in a new override layer. A part of the take (the keys' first
        and last frames inside the take's span) also gets a Linear key of what the scene shows
        on every frame of the take outside it, on every channel the layer keys: a curve holds
        its end keys' values outside them, so the layer showed the range's end poses over the
        motion there (and keying the layer's weight is not documented: docs/mobu.md); what it
        shows there is read without the layers ``replacing``, which are removed after."""
        clock = self.clock()
        targets = [(c, ch) for c, ch in enumerate(curves.channel_names)
                   if curves.animated[c] and ch not in self.skipped]
        self._refuse_driven([ch for _, ch in targets])
        # the still axes of the properties the layer animates get keys of their value: what
        # an override layer shows on an axis whose curve has no key is not documented (the
        # FBX SDK evaluates a curve without keys to its default value)
        column = {ch: c for c, ch in enumerate(curves.channel_names)}
        properties = list(dict.fromkeys(self._split(ch)[:2] for _, ch in targets))
        still = [(column[ch], ch) for node, kind in properties
                 for ch in (f"{node}.{letter}{kind}" for letter in "XYZ")
                 if ch in column and not curves.animated[column[ch]] and ch not in self.skipped]
        first, last = int(curves.frames[0]), int(curves.frames[-1])
        start, stop = self.playback_range()
        # the take's frames before and after the range (none after a range past its end)
        lead, trail = range(start, min(first - 1, stop) + 1), range(max(last + 1, start), stop + 1)
        outside, before = [*lead, *trail], len(lead)
        # read before the layer exists: the motion the scene shows there now
        keyed = [ch for _, ch in targets + still]
        with self._without(str(h.token) for h in replacing):
            parts = [self.channel_values(keyed, part[0], part[-1])
                     for part in (lead, trail) if part]
        shown = np.concatenate(parts) if parts else np.zeros((0, len(keyed)))
        linear = fb.FBInterpolation.kFBInterpolationLinear
        user = fb.FBTangentMode.kFBTangentModeUser
        outside_times = [fb.FBTime(clock.ticks(f)) for f in outside]

        def around(times: list[fb.FBTime], values: np.ndarray, interpolation: fb.FBInterpolation,
                   mode: fb.FBTangentMode, j: int) -> tuple[list, list, list, list]:
            # (the keys of the range between the outside keys before and after it; a key's
            # interpolation shapes the segment after it, so the range's last key is Linear
            # before a key outside: its segment to the next frame is a line, as the one from
            # the frame before the range to its first key, not a cubic whose right slope
            # nothing set)
            n, after = len(times), len(outside) - before
            inside = [interpolation] * n
            if after:
                inside[-1] = linear
            return (outside_times[:before] + times + outside_times[before:],
                    [*shown[:before, j], *values, *shown[before:, j]],
                    [linear] * before + inside + [linear] * after,
                    [user] * before + [mode] * n + [user] * after)

        with host_step(f"creating override layer {layer!r}"):
            created, index = self._new_layer(layer, fb.FBLayerMode.kFBLayerModeOverride)
        times = [fb.FBTime(clock.ticks(int(f))) for f in curves.frames]
        spans = np.diff(curves.frames).astype(float)
        one_slope = curves.tangents in ONE_SLOPE
        mode = fb.FBTangentMode.kFBTangentModeUser if one_slope \
            else fb.FBTangentMode.kFBTangentModeBreak
        cubic = fb.FBInterpolation.kFBInterpolationCubic
        animation: dict[tuple[str, str], fb.FBAnimationNode] = {}
        with self._on_layer(index), \
                self._progress(f"Salient Poses: keying {created.Name}", len(targets)) as step:
            for n, (c, channel) in enumerate(targets):
                step(n)
                node, kind, axis = self._split(channel)
                with host_step(f"keying {channel} in layer {created.Name!r}"):
                    if (node, kind) not in animation:
                        animation[node, kind] = self._layer_curves(node, kind)
                    fcurve = animation[node, kind].Nodes[axis].FCurve
                    # out handle of key k lies in segment k; in handle of key k in segment k-1
                    out_d, out_w = to_mobu(curves.out_handles[:-1, c], spans, clock.fps)
                    in_d, in_w = to_mobu(curves.in_handles[1:, c], spans, clock.fps)
                    keys = around(times, curves.values[:, c], cubic, mode, n)
                    self._key(fcurve, channel, *keys)
                    _set_tangents(fcurve, len(times), out_d, in_d,
                                  (out_w, in_w) if curves.tangents == "weighted" else None,
                                  broken=not one_slope, offset=before)
                    fcurve.EditEnd(len(keys[0]))
            for n, (c, channel) in enumerate(still, start=len(targets)):
                node, kind, axis = self._split(channel)
                with host_step(f"keying {channel} in layer {created.Name!r}"):
                    fcurve = animation[node, kind].Nodes[axis].FCurve
                    # one key, or with keys outside, Linear ones on the range's ends (a key on
                    # the first frame alone would ease to the next outside key over the range)
                    ends = times[:1] if not outside or first == last else [times[0], times[-1]]
                    keys = around(ends, np.full(len(ends), curves.values[0, c]),
                                  linear if outside else cubic, user if outside else mode, n)
                    self._key(fcurve, channel, *keys)
                    fcurve.EditEnd(len(keys[0]))
        return LayerHandle(created.Name, "override", token=created.Name)

    @staticmethod
    def _key(fcurve: fb.FBFCurve, channel: str, times: list[fb.FBTime],
             values: Sequence[float] | np.ndarray,
             interpolations: fb.FBInterpolation | list[fb.FBInterpolation],
             modes: fb.FBTangentMode | list[fb.FBTangentMode]) -> None:
        """``EditBegin`` and one ``KeysAdd`` (the caller sets tangents, then ``EditEnd``);
        an interpolation or tangent mode for every key, or one for all."""
        n = len(times)
        fcurve.EditBegin(n)
        if not fcurve.KeysAdd(times, [float(v) for v in values],
                              interpolations if isinstance(interpolations, list)
                              else [interpolations] * n,
                              modes if isinstance(modes, list) else [modes] * n):
            fcurve.EditEnd(n)
            raise HostError(f"keying {channel}: MotionBuilder refused the keys (is the "
                            "property or the layer locked?)")

    def write_residual(self, channels: Sequence[str], frames: np.ndarray, residual: np.ndarray,
                       layer: str, weight: float, edit: bool = False) -> LayerHandle:
        """Translations: original − reduced. Rotations: in a layer that composes rotations per
        layer (quaternions, MotionBuilder's default) the per-frame rotation from the reduced pose
        to the original one; in a per-channel (Euler) layer original − reduced."""
        clock = self.clock()
        first, last = int(frames[0]), int(frames[-1])
        columns = {c: i for i, c in enumerate(channels)}
        self._refuse_driven(channels)
        with host_step(f"creating additive layer {layer!r}"):
            # (an edit is the artist's: reads of the motion include it)
            created, index = self._new_layer(layer, fb.FBLayerMode.kFBLayerModeAdditive,
                                             reduction=not edit)
            created.Weight = 100.0 * float(weight)
            per_layer = int(created.LayerRotationMode) != int(
                fb.FBLayerRotationMode.kFBLayerRotationModeEulerRotation)
        values = dict(zip(channels, residual.T, strict=True))
        if per_layer:
            self.notes = ["MotionBuilder composes this layer's rotations as quaternions, so the "
                          "residual layer holds each joint's turn from the reduced to the "
                          "original pose (exact at weight 100), not per-channel differences."]
            for node in dict.fromkeys(self._split(c)[0] for c in channels):
                if any(c.startswith(node + ".") and c.endswith("rotation") for c in channels):
                    values.update(self._rotation_residual(node, columns, residual, first,
                                                          last))
        else:
            self.notes = ["The residual layer composes rotations per channel: it holds "
                          "original − reduced for every channel."]
        # ended by zero keys: nothing of the residual outside the analysed range
        padded = ended_at_zero(frames, residual)[0]
        times = [fb.FBTime(clock.ticks(int(f))) for f in padded]
        self._key_linear(created, index, "residual",
                         [(ch, times, ended_at_zero(frames, v)[1]) for ch, v in values.items()
                          if ch not in self.skipped],
                         constant=False)
        return LayerHandle(created.Name, "additive", token=created.Name)

    def _key_linear(self, created: fb.FBAnimationLayer, index: int, what: str,
                    targets: list[tuple[str, list[fb.FBTime], np.ndarray]],
                    constant: bool) -> None:
        """Key each (channel, times, values) of ``targets`` with Linear keys into the layer
        ``created`` (its ``index``); ``constant``: constant extrapolation on both sides."""
        linear = fb.FBInterpolation.kFBInterpolationLinear
        user = fb.FBTangentMode.kFBTangentModeUser
        animation: dict[tuple[str, str], fb.FBAnimationNode] = {}
        with self._on_layer(index), \
                self._progress(f"Salient Poses: keying {created.Name}", len(targets)) as step:
            for n, (channel, times, values) in enumerate(targets):
                step(n)
                node, kind, axis = self._split(channel)
                with host_step(f"keying the {what} of {channel} in layer {created.Name!r}"):
                    if (node, kind) not in animation:
                        animation[node, kind] = self._layer_curves(node, kind)
                    fcurve = animation[node, kind].Nodes[axis].FCurve
                    self._key(fcurve, channel, times, values, linear, user)
                    fcurve.EditEnd(len(times))
                    if constant:
                        const = fb.FBExtrapolationMode.kFCurveExtrapolationConst
                        fcurve.SetPreExtrapolationMode(const)
                        fcurve.SetPostExtrapolationMode(const)

    def write_sparse(self, keys: Mapping[str, tuple[np.ndarray, np.ndarray]], layer: str,
                     weight: float) -> LayerHandle:
        """Each channel's few keys (host frames, degrees / scene units) as Linear keys with
        constant extrapolation in a new additive layer. In a layer that composes rotations per
        layer (quaternions, MotionBuilder's default) a joint's rotation keys become the turn
        from the pose below to the corrected pose, keyed on all three axes at the union of the
        joint's key frames: exact on those frames, linear between them."""
        clock = self.clock()
        sparse = sparse_keys(keys)
        self._refuse_driven(list(sparse))
        with host_step(f"creating additive layer {layer!r}"):
            created, index = self._new_layer(layer, fb.FBLayerMode.kFBLayerModeAdditive)
            created.Weight = 100.0 * float(weight)
            per_layer = int(created.LayerRotationMode) != int(
                fb.FBLayerRotationMode.kFBLayerRotationModeEulerRotation)
        if per_layer and any(c.endswith("rotation") for c in sparse):
            with host_step(f"computing the rotation keys of layer {created.Name!r}"):
                sparse = self._turn_keys(sparse)
            self.notes = ["MotionBuilder composes this layer's rotations as quaternions, so the "
                          "corrective layer holds each joint's turn from the pose below to the "
                          "corrected one, keyed at the joint's corrective frames (exact there, "
                          "linear between them)."]
        self._key_linear(created, index, "corrections",
                         [(ch, [fb.FBTime(clock.ticks(float(f))) for f in frames], values)
                          for ch, (frames, values) in sparse.items() if ch not in self.skipped],
                         constant=True)
        return LayerHandle(created.Name, "additive", token=created.Name)

    def _turn_keys(self, sparse: dict[str, tuple[np.ndarray, np.ndarray]]
                   ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """``sparse`` with each corrected joint's rotation keys replaced by Euler angles (its
        order) of R_below⁻¹ · R(below + correction) at the union of its rotation key frames;
        "below" is what the scene shows there, as the Euler solution nearest the motion read."""
        out = {c: fv for c, fv in sparse.items() if not c.endswith("rotation")}
        start, read = self._read
        rotated = [c for c in sparse if c.endswith("rotation")]
        infos = [self._describe(n) for n in dict.fromkeys(self._split(c)[0] for c in rotated)]
        channels = [f"{i.name}.{a}rotation" for i in infos for a in i.order]
        # one scene evaluation per frame any joint is keyed at, for all the joints
        sampled = np.unique(np.concatenate([sparse[c][0] for c in rotated]))
        scene = self._scene_samples(infos, channels, [int(f) for f in sampled])[0]
        for j, info in enumerate(infos):
            node = info.name
            every = channels[3 * j:3 * j + 3]
            frames = np.unique(np.concatenate([sparse[c][0] for c in every if c in sparse]))
            correction = np.column_stack([np.interp(frames, *sparse[c]) if c in sparse
                                          else np.zeros(len(frames)) for c in every])
            below = scene[np.searchsorted(sampled, frames)][:, 3 * j:3 * j + 3]
            rows = frames.astype(int) - start
            if all(c in read for c in every) and rows.min() >= 0 \
                    and rows.max() < len(read[every[0]]):
                reference = np.column_stack([read[c][rows] for c in every])
                below = np.array([unwrap_euler_from(b[None], r)[0]
                                  for b, r in zip(below, reference, strict=True)])
            turn = Rotation.from_euler(info.order, below, degrees=True).inv() \
                * Rotation.from_euler(info.order, below + correction, degrees=True)
            angles = turn.as_euler(info.order, degrees=True)
            if any(c in self.skipped for c in every):
                # the turn needs all three angles; a locked axis cannot take its share
                self.skipped[f"{node}.rotation corrections"] = "inexact: a rotation axis is " \
                    "locked"
            out.update({c: (frames, angles[:, j]) for j, c in enumerate(every)})
        return out

    def _rotation_residual(self, node: str, columns: dict[str, int], residual: np.ndarray,
                           first: int, last: int) -> dict[str, np.ndarray]:
        """Euler angles (node order) of R_reduced⁻¹ · R_original on every frame."""
        order = ROTATE_ORDERS[int(self._model(node).RotationOrder)]
        every = [f"{node}.{a}rotation" for a in order]
        start, read = self._read
        if any(c not in read for c in every) or first < start \
                or last - start >= len(read[every[0]]):
            raise HostError(f"writing the residual of {node}: its motion over frames "
                            f"{first}..{last} was not read by this host")
        original = np.column_stack([read[c][first - start:last - start + 1] for c in every])
        delta = np.zeros_like(original)  # original − what the layers below now hold
        for j, channel in enumerate(every):
            if channel in columns and channel not in self.skipped:
                delta[:, j] = residual[:, columns[channel]]
        if any(c in self.skipped for c in every):
            # the turn needs all three angles; a locked axis cannot take its share
            self.skipped[f"{node}.rotation residual"] = "inexact: a rotation axis is locked"
        reduced = Rotation.from_euler(order, original - delta, degrees=True)
        turn = reduced.inv() * Rotation.from_euler(order, original, degrees=True)
        angles = turn.as_euler(order, degrees=True)
        return {channel: angles[:, j] for j, channel in enumerate(every)}

    def remove_layer(self, handle: LayerHandle) -> None:
        take = fb.FBSystem().CurrentTake
        with host_step(f"removing layer {handle.name!r}"):
            for index in range(take.GetLayerCount() - 1, 0, -1):
                if take.GetLayer(index).Name == handle.token:
                    take.RemoveLayer(index)
                    return
            # not in the take (an undo took it away, the user deleted it): removed already

    @contextmanager
    def undo_chunk(self, label: str) -> Iterator[None]:
        """One ``FBUndoManager`` transaction (unless one is already open); if the block fails,
        every layer it created is removed and every property it animated is unanimated."""
        undo = fb.FBUndoManager()
        try:  # documented for UI callbacks; without a UI (mobupy) it may refuse
            opened = not undo.TransactionIsOpen() and bool(undo.TransactionBegin(label))
        except Exception:  # noqa: BLE001 - then the rollback below is the only undo
            opened = False
        self._created, self._animated = [], []
        try:
            yield
        except BaseException:
            self._roll_back()
            raise
        finally:
            self._created, self._animated = [], []
            if opened:
                undo.TransactionEnd()

    def _roll_back(self) -> None:
        take = fb.FBSystem().CurrentTake
        for layer in reversed(self._created):
            for index in range(take.GetLayerCount() - 1, 0, -1):
                if take.GetLayer(index) is layer or take.GetLayer(index).Name == layer.Name:
                    try:
                        take.RemoveLayer(index)
                    except Exception:  # noqa: BLE001 - keep removing the others
                        pass
                    break
        for prop in self._animated:
            try:
                prop.SetAnimated(False)
            except Exception:  # noqa: BLE001
                pass
        take.SetCurrentLayer(0)

    # ------------------------------------------------------------------ preview
    def preview_keyframes(self, frames: Sequence[int],
                          labels: Sequence[str] | None = None) -> None:
        """Time marks on the take's timeline (replacing earlier ones), named "SalientPoses" or,
        for layered selections, "SalientPoses keypose" / "SalientPoses breakdown" and coloured
        (MotionBuilder has no breakdown keys)."""
        self.clear_preview()
        clock = self.clock()
        take = fb.FBSystem().CurrentTake
        with host_step("adding time marks"):
            for i, frame in enumerate(frames):
                index = take.AddTimeMark(fb.FBTime(clock.ticks(int(frame))))
                if index < 0:  # a mark is at that time already (AddTimeMark: -1): keep it
                    continue
                label = labels[i] if labels is not None else None
                take.SetTimeMarkName(index, f"{MARK} {label}" if label else MARK)
                if label in MARK_COLOURS:
                    take.SetTimeMarkColor(index, fb.FBColor(*MARK_COLOURS[label]))

    def clear_preview(self) -> None:
        take = fb.FBSystem().CurrentTake
        with host_step("removing time marks"):
            for index in range(take.GetTimeMarkCount() - 1, -1, -1):
                name = take.GetTimeMarkName(index)
                if name == MARK or name.startswith(MARK + " "):
                    take.DeleteTimeMark(index)


def _set_tangents(fcurve: fb.FBFCurve, n: int, out_d: np.ndarray, in_d: np.ndarray,
                  weights: tuple[np.ndarray, np.ndarray] | None, broken: bool,
                  offset: int = 0) -> None:
    """Per key: clamping off, the slope(s) in value per second, and the weights if any; the
    n keys are the curve's keys ``offset`` .. ``offset + n - 1``.

    Every key takes both derivatives it has (the left one from its in handle, then the right
    one from its out handle; a one-slope (User) key's two are the same slope), so no key's
    slope depends on where MotionBuilder keeps a derivative set on another key (the FBX key
    model stores a key's left slope on the key before it). Weights: key k's right weight is
    its out handle's, key k's left weight its in handle's (MotionBuilder stores the latter on
    key k − 1 as "next left")."""
    unclamped = fb.FBTangentClampMode.kFBTangentClampModeNone
    for k in range(n):
        key = offset + k
        fcurve.KeySetTangentClampMode(key, unclamped)
        if broken:
            fcurve.KeySetTangentBreak(key, True)
        if k > 0:
            fcurve.KeySetLeftDerivative(key, float(in_d[k - 1]))
        if k < n - 1:
            fcurve.KeySetRightDerivative(key, float(out_d[k]))
        if weights is not None:
            if k < n - 1:
                fcurve.KeySetRightTangentWeight(key, float(weights[0][k]))
            if k > 0:
                fcurve.KeySetLeftTangentWeight(key, float(weights[1][k - 1]))


def _set_mute(layer: fb.FBAnimationLayer, on: bool) -> None:
    layer.Mute = on


def _property(model: fb.FBModel, kind: str) -> fb.FBPropertyAnimatableVector3d:
    """``Translation`` or ``Rotation`` of a model."""
    return model.Translation if kind == "position" else model.Rotation


def _xyz(angles: Sequence[float]) -> np.ndarray:
    """(3, 3) rotation of pre/post-rotation angles (degrees; always XYZ: R = Rz·Ry·Rx)."""
    return Rotation.from_euler("ZYX", list(angles)[::-1], degrees=True).as_matrix()


def _angle_aware(difference: np.ndarray, channels: Sequence[str]) -> np.ndarray:
    """Differences with rotation columns wrapped to (−180, 180] (the scene may report an
    equivalent angle)."""
    out = difference.copy()
    for c, channel in enumerate(channels):
        if channel.endswith("rotation"):
            out[:, c] = (out[:, c] + 180.0) % 360.0 - 180.0
    return out
