"""The scene behind the strict fake ``maya`` package (see FACTS.md for every modelled behaviour).

Not Autodesk code: a small model written from Autodesk's documentation. Values are stored in
Maya's *internal* units (cm, radians, seconds); ``cmds`` converts to and from UI units, the API
does not.
"""

from __future__ import annotations

import copy
from collections import Counter
from dataclasses import dataclass, field

import numpy as np
from scipy.spatial.transform import Rotation

#: rotateOrder enum (xyz, yzx, zxy, xzy, yxz, zyx) -> scipy intrinsic sequence of R = R3·R2·R1.
ORDERS = ("ZYX", "XZY", "YXZ", "YZX", "ZXY", "XYZ")
AXES = "XYZ"

#: MTime unit enum (values of maya.api.OpenMaya.MTime) -> frames per second.
TIME_RATES = {3: 1.0, 4: 1000.0, 5: 15.0, 6: 24.0, 7: 25.0, 8: 30.0, 9: 48.0, 10: 50.0,
              11: 60.0, 26: 120.0, 43: 24000 / 1001, 44: 30000 / 1001, 45: 30000 / 1001,
              46: 48000 / 1001, 47: 60000 / 1001, 51: 120000 / 1001}
#: currentUnit -time names (currentUnit docs) -> MTime enum.
TIME_NAMES = {"sec": 3, "millisec": 4, "game": 5, "film": 6, "pal": 7, "ntsc": 8, "show": 9,
              "palf": 10, "ntscf": 11, "120fps": 26, "23.976fps": 43, "29.97fps": 44,
              "29.97df": 45, "47.952fps": 46, "59.94fps": 47, "119.88fps": 51}
LINEAR_CM = {"mm": 0.1, "cm": 1.0, "m": 100.0, "in": 2.54, "ft": 30.48}
ANGLE_RAD = {"deg": np.pi / 180.0, "rad": 1.0}

# MFnAnimCurve.TangentType values (C++/Python reference)
GLOBAL, FIXED, LINEAR, FLAT, SMOOTH, STEP = 0, 1, 2, 3, 4, 5


class MayaError(RuntimeError):
    """What Maya raises for a failed command or API call (RuntimeError in Python)."""


@dataclass
class Curve:
    """An animCurveT? node: keys at times in seconds, values in internal units.

    Tangents are stored as Maya's (x, y) pairs in (seconds, internal value), both pointing
    forward in time: the out control point of key k is (t_k + ox/3, v_k + oy/3) and the in
    control point of key k is (t_k − ix/3, v_k − iy/3).
    """

    kind: str  # "TL", "TA", "TU"
    times: np.ndarray = field(default_factory=lambda: np.zeros(0))
    values: np.ndarray = field(default_factory=lambda: np.zeros(0))
    in_type: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    out_type: np.ndarray = field(default_factory=lambda: np.zeros(0, int))
    ix: np.ndarray = field(default_factory=lambda: np.zeros(0))
    iy: np.ndarray = field(default_factory=lambda: np.zeros(0))
    ox: np.ndarray = field(default_factory=lambda: np.zeros(0))
    oy: np.ndarray = field(default_factory=lambda: np.zeros(0))
    tangents_locked: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    weights_locked: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    breakdown: np.ndarray = field(default_factory=lambda: np.zeros(0, bool))
    weighted: bool = False
    interpolation: str = "none"  # rotationInterpolation of a rotate curve (Euler: "none")
    referenced: bool = False

    ARRAYS = ("times", "values", "in_type", "out_type", "ix", "iy", "ox", "oy",
              "tangents_locked", "weights_locked", "breakdown")

    def copy(self) -> Curve:
        return copy.deepcopy(self)

    def set_keys(self, times, values, in_type, out_type, keep: bool) -> None:
        """Insert keys (replacing keys at equal times, or all keys unless ``keep``)."""
        n = len(times)
        new = {"times": np.asarray(times, float), "values": np.asarray(values, float),
               "in_type": np.full(n, in_type, int) if np.ndim(in_type) == 0
               else np.asarray(in_type, int),
               "out_type": np.full(n, out_type, int) if np.ndim(out_type) == 0
               else np.asarray(out_type, int),
               "ix": np.ones(n), "iy": np.zeros(n), "ox": np.ones(n), "oy": np.zeros(n),
               "tangents_locked": np.ones(n, bool), "weights_locked": np.ones(n, bool),
               "breakdown": np.zeros(n, bool)}
        if keep and len(self.times):
            old = ~np.isin(self.times, new["times"])
            for name in self.ARRAYS:
                new[name] = np.concatenate([getattr(self, name)[old], new[name]])
        order = np.argsort(new["times"], kind="stable")
        for name in self.ARRAYS:
            setattr(self, name, new[name][order])
        self._resolve_linear()

    def _resolve_linear(self) -> None:
        """Linear/flat/step tangents get their (x, y) from the neighbouring keys (keyTangent
        docs: linear = straight towards the adjacent key; flat = zero slope)."""
        t, v = self.times, self.values
        if len(t) < 2:
            return
        dt, dv = np.diff(t), np.diff(v)
        lin_out = self.out_type[:-1] == LINEAR
        self.ox[:-1][lin_out], self.oy[:-1][lin_out] = dt[lin_out], dv[lin_out]
        lin_in = self.in_type[1:] == LINEAR
        self.ix[1:][lin_in], self.iy[1:][lin_in] = dt[lin_in], dv[lin_in]
        for kind, x, y in ((FLAT, self.ix, self.iy), (FLAT, self.ox, self.oy)):
            flat = (self.in_type if x is self.ix else self.out_type) == kind
            y[flat] = 0.0

    def evaluate(self, times) -> np.ndarray:
        """Values at ``times`` (seconds): Hermite on unweighted curves (handles one third of
        the segment), Bézier on weighted ones; constant outside the keys; step holds."""
        times = np.atleast_1d(np.asarray(times, float))
        t, v = self.times, self.values
        if len(t) == 0:
            return np.zeros_like(times)
        out = np.where(times <= t[0], v[0], v[-1]).astype(float)
        inside = (times > t[0]) & (times < t[-1])
        if not inside.any():
            return out
        q = times[inside]
        k = np.clip(np.searchsorted(t, q, side="right") - 1, 0, len(t) - 2)
        t0, t1, v0, v1 = t[k], t[k + 1], v[k], v[k + 1]
        span = t1 - t0
        with np.errstate(divide="ignore", invalid="ignore"):
            m0 = np.where(self.ox[k] != 0, self.oy[k] / self.ox[k], 0.0)
            m1 = np.where(self.ix[k + 1] != 0, self.iy[k + 1] / self.ix[k + 1], 0.0)
        if self.weighted:
            p1t, p1v = t0 + self.ox[k] / 3, v0 + self.oy[k] / 3
            p2t, p2v = t1 - self.ix[k + 1] / 3, v1 - self.iy[k + 1] / 3
            # time is monotone in u for the handles Maya accepts: bracket, then Newton
            c1, c2, c3 = 3 * (p1t - t0), 3 * (p2t - 2 * p1t + t0), t1 - 3 * p2t + 3 * p1t - t0
            lo, hi = np.zeros_like(q), np.ones_like(q)
            for _ in range(12):
                u = 0.5 * (lo + hi)
                below = t0 + u * (c1 + u * (c2 + u * c3)) < q
                lo, hi = np.where(below, u, lo), np.where(below, hi, u)
            u = 0.5 * (lo + hi)
            for _ in range(6):
                slope = c1 + u * (2 * c2 + 3 * u * c3)
                step = (t0 + u * (c1 + u * (c2 + u * c3)) - q) / np.where(slope == 0, 1, slope)
                u = np.clip(u - step, lo, hi)
        else:
            u = (q - t0) / span
            p1v, p2v = v0 + m0 * span / 3, v1 - m1 * span / 3
        value = (1 - u)**3 * v0 + 3 * u * (1 - u)**2 * p1v + 3 * u**2 * (1 - u) * p2v \
            + u**3 * v1
        value = np.where(self.out_type[k] == STEP, v0, value)
        out[inside] = value
        return out


@dataclass
class Node:
    name: str
    type: str  # "joint", "transform", "animLayer", "parentConstraint"...
    parent: str | None = None
    attrs: dict[str, float] = field(default_factory=dict)  # internal units
    locked: set[str] = field(default_factory=set)
    nonkeyable: set[str] = field(default_factory=set)


@dataclass
class Layer:
    name: str
    override: bool
    weight: float = 1.0
    mute: bool = False
    accumulation: int = 0  # rotationAccumulationMode: 0 per component, 1 per layer
    passthrough: bool = True  # an override layer: False is opaque at every weight
    plugs: list[str] = field(default_factory=list)  # attributes added to the layer
    curves: dict[str, str] = field(default_factory=dict)  # plug -> curve, once keyed


@dataclass
class Scene:
    time_unit: int = 6
    linear_unit: str = "cm"
    angle_unit: str = "deg"
    playback: tuple[float, float] = (1.0, 120.0)  # UI frames
    time: float = 1.0  # UI frames
    selection: list[str] = field(default_factory=list)
    nodes: dict[str, Node] = field(default_factory=dict)
    curves: dict[str, Curve] = field(default_factory=dict)
    inputs: dict[str, str] = field(default_factory=dict)  # plug -> source node (curve, ...)
    layers: list[Layer] = field(default_factory=list)
    version: int = 0

    @property
    def fps(self) -> float:
        return TIME_RATES[self.time_unit]

    def snapshot(self) -> Scene:
        """A copy for undo: curves are shared (cmds replaces a curve object before editing it;
        API edits are undone through MAnimCurveChange)."""
        other = copy.copy(self)
        other.selection = list(self.selection)
        other.nodes = {k: Node(v.name, v.type, v.parent, dict(v.attrs), set(v.locked),
                               set(v.nonkeyable)) for k, v in self.nodes.items()}
        other.curves = dict(self.curves)
        other.inputs = dict(self.inputs)
        other.layers = [Layer(la.name, la.override, la.weight, la.mute, la.accumulation,
                              la.passthrough, list(la.plugs), dict(la.curves))
                        for la in self.layers]
        return other


class State:
    """Module-level state of the fake session: the scene, undo queue, calls, plug-ins."""

    def __init__(self) -> None:
        self.scene = Scene()
        self.undo_queue: list[list] = []  # entries: ("snapshot", Scene) or ("command", obj)
        self.chunks: list[list] = []
        self.undo_on = True  # undoInfo -state
        self.calls: Counter[str] = Counter()
        self.unrecorded_api_edits: list[str] = []
        self.plugins: dict[str, dict] = {}
        self.plugin_path: list[str] = []
        self.saved: dict[str, Scene] = {}
        self.file_name = ""
        self.batch = True
        self.context_time: float | None = None  # seconds, set by MDGContextGuard
        self.cache: dict = {}
        self.ui: dict = {"workspace": {}, "menus": {}, "progress": None, "ui_scripts": 0}
        self.option_vars: dict[str, int] = {}  # optionVar (the user's preferences)

    def touch(self) -> None:
        self.scene.version += 1
        self.cache.clear()

    # ------------------------------------------------------------------ undo
    def record(self, entry) -> None:
        if not self.undo_on:  # undo off: nothing is recorded, nothing can be undone
            return
        if self.chunks:
            self.chunks[-1].append(entry)
        else:
            self.undo_queue.append([entry])

    def undo(self) -> None:
        if not self.undo_queue:
            raise MayaError("There are no more commands to undo.")
        for kind, item in reversed(self.undo_queue.pop()):
            if kind == "snapshot":
                self.scene = item
            else:
                item.undoIt()
        self.touch()

    # ------------------------------------------------------------------ evaluation
    def plug_value(self, plug: str, seconds: float) -> float:
        """Composite value (internal units) of ``node.attr`` at a time."""
        return float(self.plug_values(plug, np.array([seconds]))[0])

    def plug_values(self, plug: str, seconds: np.ndarray) -> np.ndarray:
        scene = self.scene
        node, attr = plug.split(".", 1)
        source = scene.inputs.get(plug)
        if source in scene.curves:
            value = scene.curves[source].evaluate(seconds)
        else:
            value = np.full(len(seconds), scene.nodes[node].attrs[attr])
        for layer in scene.layers:
            if layer.mute or plug not in layer.curves:
                continue
            mine = scene.curves[layer.curves[plug]].evaluate(seconds)
            keyed = scene.inputs.get(f"{layer.name}.weight")  # a curve drives the weight
            weight = scene.curves[keyed].evaluate(seconds) if keyed in scene.curves \
                else layer.weight
            # an override layer with passthrough (animLayer's default) shows w of itself and
            # 1 - w of the layers below; without it, w of itself and nothing of them
            if layer.override:
                below = (1 - weight) * value if layer.passthrough else 0.0
                value = below + weight * mine
            else:
                value = value + weight * mine
        return value

    def local_matrices(self, name: str, seconds: np.ndarray) -> np.ndarray:
        """(n, 4, 4) column-vector local matrices: T · JO · R · RA (joint docs, transposed)."""
        node = self.scene.nodes[name]
        n = len(seconds)
        angles = np.stack([self.plug_values(f"{name}.rotate{a}", seconds) for a in AXES], 1)
        seq = ORDERS[int(node.attrs.get("rotateOrder", 0))]
        by_axis = {a: angles[:, i] for i, a in enumerate(AXES)}
        rotate = Rotation.from_euler(seq, np.stack([by_axis[a] for a in seq], 1)).as_matrix()
        def fixed(prefix: str) -> np.ndarray:  # jointOrient / rotateAxis: X, then Y, then Z
            values = [node.attrs.get(f"{prefix}{a}", 0.0) for a in AXES]
            return Rotation.from_euler("ZYX", values[::-1]).as_matrix()

        orient, axis = fixed("jointOrient"), fixed("rotateAxis")
        out = np.tile(np.eye(4), (n, 1, 1))
        out[:, :3, :3] = orient @ rotate @ axis
        out[:, :3, 3] = np.stack([self.plug_values(f"{name}.translate{a}", seconds)
                                  for a in AXES], 1)
        return out

    def world_matrices(self, name: str, seconds: np.ndarray) -> np.ndarray:
        key = (name, seconds.tobytes())
        if key not in self.cache:
            local = self.local_matrices(name, seconds)
            parent = self.scene.nodes[name].parent
            self.cache[key] = local if parent is None \
                else self.world_matrices(parent, seconds) @ local
        return self.cache[key]

    def world_matrix_at(self, name: str, seconds: float) -> np.ndarray:
        """Column-vector world matrix at one time; evaluated for the whole playback range at
        once and cached until the scene changes (so long reads stay fast in tests)."""
        scene = self.scene
        key = ("grid", scene.playback, scene.fps)
        if key not in self.cache:
            first, last = scene.playback
            grid = np.arange(round(first), round(last) + 1) / scene.fps
            self.cache[key] = (grid, {round(t * 1e6): i for i, t in enumerate(grid)})
        grid, index = self.cache[key]
        hit = index.get(round(seconds * 1e6))
        if hit is not None and abs(grid[hit] - seconds) < 1e-9:
            return self.world_matrices(name, grid)[hit]
        return self.world_matrices(name, np.array([seconds]))[0]


STATE = State()
