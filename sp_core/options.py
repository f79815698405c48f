"""THE declaration of every option: type, default, unit, valid range, help and command-line flag.

Every front end is generated from or bound to these dataclasses: the ``salient-poses`` flags
(:func:`add_arguments`), validation with one message per bad value (:func:`coerce`), presets in
JSON or TOML (:func:`load_preset`, :func:`Options.to_dict`), the options block of every output
JSON, the panel's widgets, the Maya and MotionBuilder Python APIs and batch flags. Adding an
option is one field here plus its use in the engine (see docs/contributing.md).

The one rule that turns options into K for a clip is :func:`k_for`; nobody else clamps K.
"""

from __future__ import annotations

import argparse
import dataclasses
import difflib
import functools
import hashlib
import json
import math
import operator
import tomllib
from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from pathlib import Path
from types import MappingProxyType
from typing import Any

from sp_core.errors import OptionError

# Fronts a field reaches: the command line, the panel, the host Python APIs and batches.
CLI, PANEL, HOST = "cli", "panel", "host"
ALL_FRONTS = frozenset({CLI, PANEL, HOST})

POSE_SPACES = ("positions", "channels")
COMPOSITIONS = ("max", "sum")
TANGENT_MODES = ("unified", "broken", "smooth", "weighted")
FIT_SPACES = ("channel", "world")
#: ``fitted``: key values fitted with the tangents (least squares over every frame);
#: ``captured``: keys hold the capture's values at their frames.
KEY_VALUES = ("fitted", "captured")
#: The world fit's objectives: squared errors, or squared errors then rounds reweighted towards
#: the worst joints (see :func:`sp_core.fitting.refine_world`).
FIT_OBJECTIVES = ("least-squares", "minimax")
WAND_MODES = ("local", "global")
#: The default choice of K: mean and max joint error, mm at 1.7 m (see docs/guide.md).
DEFAULT_TOLERANCE = (2.0, 20.0)
#: Corrective keys a tolerance may spend when no --corrective-budget is given, a share of the
#: original keys.
AUTOMATIC_CORRECTIVE_SHARE = 0.05


def _cost_names() -> tuple[str, ...]:
    from sp_core.costs import available_costs  # costs register themselves on import

    return tuple(sorted(available_costs()))


@dataclass(frozen=True)
class Spec:
    """How one option is typed, checked, shown and spelled on the command line.

    Attributes
    ----------
    kind : str
        ``int``, ``float``, ``bool``, ``str``, ``choice``, ``names`` (comma-separated names),
        ``frames`` (comma-separated whole frames), ``range`` (``START:END``), ``weights``
        (``NODE=W,...``), ``pins`` (frames, or :class:`Pin`), ``mapping``, ``path``,
        ``tolerance`` (``MEAN,MAX``) or ``budget`` (``N`` keys or ``P%``).
    help : str
        One line for ``--help``, tooltips and the guide.
    unit : str
        Unit of numbers (``frames``, ``scene units per frame``...), empty when unitless.
    low, high : float, optional
        Bounds of numbers; ``low_open`` / ``high_open`` exclude the bound itself.
    choices : tuple of str or callable, optional
        Allowed values of a ``choice`` (a callable for registries filled at import time).
    flag : str, optional
        The long command-line flag (default ``--field-name``).
    nullable : bool
        None is a valid value (meaning "automatic"; the help says what that is).
    fronts : frozenset of str
        Front ends the option reaches (:data:`CLI`, :data:`PANEL`, :data:`HOST`).
    suffix : str
        Required file suffix of a ``path``.
    stdout : bool
        A ``path`` that may be ``-``, standard output (any other is refused: it wrote a file
        named ``-``, past the checks of outputs).
    metavar : str
    """

    kind: str
    help: str
    unit: str = ""
    low: float | None = None
    high: float | None = None
    low_open: bool = False
    high_open: bool = False
    choices: tuple[str, ...] | Callable[[], tuple[str, ...]] | None = None
    flag: str | None = None
    nullable: bool = False
    fronts: frozenset[str] = ALL_FRONTS
    suffix: str = ""
    stdout: bool = False
    metavar: str | None = None

    def allowed(self) -> tuple[str, ...]:
        choices = self.choices() if callable(self.choices) else self.choices
        return tuple(choices or ())

    def bounds_text(self) -> str:
        """The valid range in words: ``in (0, 1]``, ``>= 1``..."""
        if self.low is not None and self.high is not None:
            return (f"in {'(' if self.low_open else '['}{self.low:g}, {self.high:g}"
                    f"{')' if self.high_open else ']'}")
        if self.low is not None:
            return f"{'>' if self.low_open else '>='} {self.low:g}"
        if self.high is not None:
            return f"{'<' if self.high_open else '<='} {self.high:g}"
        return ""


def option(default: Any, kind: str, help: str, **spec: Any) -> Any:
    """A dataclass field carrying its :class:`Spec` (``metadata["spec"]``)."""
    made = Spec(kind=kind, help=help, **spec)
    if isinstance(default, (list, dict)):
        raise TypeError("mutable defaults: use a tuple or None")
    return field(default=default, metadata={"spec": made})


@dataclass(frozen=True)
class Pin:
    """A frame that must be a keyframe, with an optional name and note."""

    frame: int
    name: str = ""
    note: str = ""


# ---------------------------------------------------------------------------------- groups
@dataclass(frozen=True)
class InputOptions:
    """How a motion file is read."""

    first_frame: int | None = option(
        None, "int", "host frame number of the clip's first frame (default the file's own: the "
        "take's start in an FBX file, 0 in a BVH file, which has no frame numbers)",
        unit="frame", metavar="N", nullable=True, fronts=frozenset({CLI}))
    take: str | None = option(None, "str", "FBX: the take (animation stack) to read (default "
                              "the file's active take)", nullable=True, fronts=frozenset({CLI}),
                              metavar="NAME")
    root: str | None = option(None, "str", "FBX: the root joint of the skeleton to read "
                              "(default the first skeleton root)", nullable=True,
                              fronts=frozenset({CLI}), metavar="NODE")


@dataclass(frozen=True)
class AnalysisOptions:
    """What is analysed and how (see :class:`sp_core.selection.SelectionSpace`)."""

    roots: tuple[str, ...] | None = option(
        None, "names", "hierarchies to analyse (default: the selection, else the whole scene)",
        nullable=True, fronts=frozenset({PANEL, HOST}), metavar="N1,N2,..")
    pose: str = option("positions", "choice", "pose space: world joint positions or channel "
                       "values", choices=POSE_SPACES)
    nodes: tuple[str, ...] | None = option(None, "names", "nodes whose poses count (default all)",
                                           nullable=True, metavar="N1,N2,..")
    weights: tuple[tuple[str, float], ...] = option(
        (), "weights", "per-node weights of the pose distance (default 1)", metavar="N=W,..")
    cost: str = option("line-sse", "choice", "how a pair of keys is scored: line-sse (squared "
                       "distances of the frames to the straight line, which the fitted curves' "
                       "mean error follows), line-max (worst frame off the straight line), "
                       "line-time, curve-max, curve-sse", choices=_cost_names)
    cost_options: tuple[tuple[str, Any], ...] = option(
        (), "mapping", "options of the cost, by name (see the cost's declaration)",
        fronts=frozenset({PANEL, HOST}))
    compose: str = option("max", "choice", "minimise the largest segment cost (max) or their "
                          "sum (sum)", choices=COMPOSITIONS)
    time_scale: float = option(0.0, "float", "add time as a pose coordinate", low=0.0,
                               high=1e6, unit="scene units per frame", metavar="S")
    frame_range: tuple[int, int] | None = option(
        None, "range", "host frames to analyse, inclusive (default the whole clip)",
        flag="--range", nullable=True, unit="frames", metavar="START:END")
    pins: tuple[Pin, ...] = option((), "pins", "frames that must be keyframes", unit="frames",
                                   metavar="F,F,..")
    stride: int = option(1, "int", "interior keys only on frames divisible by S", low=1,
                         unit="frames", metavar="S")
    max_span: int | None = option(None, "int", "longest gap between keyframes (default none)",
                                  low=1, nullable=True, unit="frames", metavar="F")
    max_keys: int | None = option(None, "int", "largest K solved (default half the candidate "
                                  "frames; on a command line, the K asked for)", low=2,
                                  nullable=True, metavar="K")
    memory_gib: float = option(2.0, "float", "memory one analysis may use; past it the "
                               "analysis refuses and names the options that make it fit",
                               low=0.05, high=4096.0, unit="GiB", metavar="G")
    time_budget: float | None = option(
        None, "float", "seconds the table and selection may take by the time estimate (two "
        "cores); past it, or past --memory-gib, a long take gets a window (keys at most "
        "--max-span apart, K up to --max-keys, chosen to fit; given values are kept) and a "
        "note says so (default 1.5 s plus 0.25 s per 1,000 frames)", low=0.0, low_open=True,
        nullable=True, unit="s", metavar="S")
    layered: bool = option(False, "bool", "label keys as keyposes and breakdowns, chosen on "
                           "the --leading part")
    leading: tuple[str, ...] = option((), "names", "nodes of the leading part (e.g. RightWrist "
                                      "for a throw); needs --layered", metavar="N1,N2,..")
    accuracy: float = option(0.05, "float", "threshold of the suggested K (the first K whose "
                             "error is at most this fraction of the largest pose distance, "
                             "after --significance) and of the keypose and breakdown layers",
                             low=0.0, high=1.0,
                             low_open=True, metavar="A")
    significance: float = option(0.1, "float", "least improvement one more key must bring, a "
                                 "fraction of the error before it (the suggested K is the "
                                 "first accurate K after such a drop: a higher value often "
                                 "means more keys, not fewer)", low=0.0, high=1.0,
                                 high_open=True, metavar="S")
    breakdowns: int | None = option(None, "int", "breakdowns added to the keyposes (default: "
                                    "the breakdown space's threshold rule)", low=0,
                                    nullable=True, fronts=frozenset({PANEL, HOST}), metavar="B")


@dataclass(frozen=True)
class KeyOptions:
    """How many keys: one of ``keys``, ``ratio``, ``frames``, else the suggested K."""

    keys: int | None = option(None, "int", "the optimal K keyframes (first and last included)",
                              low=2, nullable=True, metavar="K")
    ratio: float | None = option(None, "float", "K = R x frames of the range rounded half up, "
                                 "e.g. 0.05", low=0.0, high=1.0, low_open=True, nullable=True,
                                 metavar="R")
    suggested: bool = option(False, "bool", "the suggested K of the threshold rule (the "
                             "error graph's cliffs are offered either way)")
    tolerance: tuple[float, float] | None = option(
        DEFAULT_TOLERANCE, "tolerance", "the smallest K whose reduction (with corrective keys, "
        "see --corrective-budget) keeps the mean and max joint error within MEAN,MAX "
        "(character scaled to 1.7 m); the default choice of K unless --keys, --ratio, "
        "--suggested or --frames is given", nullable=True, unit="mm", metavar="MEAN,MAX")
    frames: tuple[int, ...] | None = option(
        None, "frames", "these host frames, no analysis; the first and last bound the range",
        nullable=True, unit="frames", fronts=frozenset({CLI, HOST}), metavar="F,F,..")


@dataclass(frozen=True)
class FitOptions:
    """How the curves are fitted through the keys (see :func:`sp_core.reduction.reduce`)."""

    tangents: str = option("unified", "choice", "unified (one tangent in and out, to edit), "
                           "broken, smooth (broken with a penalty), weighted",
                           choices=TANGENT_MODES)
    # (from about 1e6 on the curves are unified; at 1e18 the normal equations were singular)
    smoothness: float = option(1.0, "float", "broken-tangent penalty of --tangents smooth",
                               low=0.0, high=1e6, metavar="X")
    space: str = option("world", "choice", "fit world joint positions (default) or channel "
                        "values (fast)", choices=FIT_SPACES)
    world_iterations: int = option(12, "int", "Gauss-Newton iterations of the world fit",
                                   low=1, high=100, metavar="N")
    key_values: str = option("fitted", "choice", "key values fitted with the tangents (least "
                             "squares over every frame, lower error) or the captured values at "
                             "the keyframes", choices=KEY_VALUES)
    objective: str = option("least-squares", "choice", "what the world fit minimises: "
                            "least-squares (the sum of squared joint errors, the lowest mean) "
                            "or minimax (then rounds that weigh the worst joint errors most: "
                            "a lower max, the mean at most 5% higher)", choices=FIT_OBJECTIVES,
                            flag="--fit-objective")
    corrective_budget: str | None = option(
        None, "budget", "corrective keys on single channels where the pose-key result is "
        "worst, written into an additive layer: N keys or P% of the original keys (default: "
        "none, or up to 5% while a tolerance chooses K, stopping once it is met)",
        nullable=True, unit="keys or %", metavar="N|P%")


@dataclass(frozen=True)
class LayerOptions:
    """What Apply writes into a host."""

    layer: str = option("salientPoses", "str", "name of the new animation layer",
                        fronts=frozenset({PANEL, HOST}), metavar="NAME")
    residual_layer: bool = option(False, "bool", "also write original - reduced into an "
                                  "additive layer", fronts=frozenset({PANEL, HOST}))
    residual_weight: float = option(1.0, "float", "weight of the residual layer", low=0.0,
                                    high=1.0, fronts=frozenset({PANEL, HOST}), metavar="W")


@dataclass(frozen=True)
class OutputOptions:
    """Files a command writes (every file is written atomically; see docs/guide.md)."""

    json: str | None = option(None, "path", "write the result as JSON ('-': standard output)",
                              nullable=True, suffix=".json", fronts=frozenset({CLI}),
                              stdout=True, metavar="OUT.json")
    bvh: str | None = option(None, "path", "the motion on every frame as BVH", nullable=True,
                             suffix=".bvh", fronts=frozenset({CLI}), metavar="OUT.bvh")
    residual: str | None = option(None, "path", "original - reduced channel values "
                                  "(n_frames, n_channels)", nullable=True, suffix=".npy",
                                  fronts=frozenset({CLI}), metavar="OUT.npy")
    positions: str | None = option(None, "path", "world positions (n_frames, n_nodes, 3), "
                                   "scene units, nodes in hierarchy order with End Sites",
                                   nullable=True, suffix=".npy", fronts=frozenset({CLI}),
                                   metavar="OUT.npy")
    plot: str | None = option(None, "path", "save the error-against-K graph", nullable=True,
                              suffix=".png", fronts=frozenset({CLI}), metavar="OUT.png")
    linear: bool = option(False, "bool", "linear error axis in --plot", fronts=frozenset({CLI}))
    tree: bool = option(False, "bool", "also print the hierarchy", fronts=frozenset({CLI}))
    screenshot: str | None = option(None, "path", "save the window as a PNG and exit (works "
                                    "without a display)", nullable=True, suffix=".png",
                                    fronts=frozenset({CLI}), metavar="OUT.png")
    apply: bool = option(False, "bool", "press Apply after the analysis (with --keys)",
                         fronts=frozenset({CLI}))
    falloff: str | None = option(None, "path", "the edit's weight per host frame "
                                 "(frame,weight)", nullable=True, suffix=".csv",
                                 fronts=frozenset({CLI}), metavar="OUT.csv")
    overwrite: bool = option(False, "bool", "replace output files that already exist (an "
                             "input is never overwritten)", fronts=frozenset({CLI, HOST}))
    demo_out: str = option("demo_out", "path", "folder for the demo's outputs", flag="--out",
                           fronts=frozenset({CLI}), metavar="DIR")


@dataclass(frozen=True)
class BatchOptions:
    """Where a batch writes and how many processes it uses."""

    out: str | None = option(None, "path", "output folder", nullable=True,
                             fronts=frozenset({CLI, HOST}), metavar="DIR")
    workers: int | None = option(None, "int", "processes (default one per core)", low=1,
                                 nullable=True, fronts=frozenset({CLI}), metavar="N")
    scheduler: str | None = option(None, "str", "run on Dask: an existing scheduler's address "
                                   "(tcp://host:8786) or local:N for a local cluster of N "
                                   "worker processes (default: a local process pool)",
                                   nullable=True, fronts=frozenset({CLI}), metavar="ADDRESS")
    json_log: bool = option(False, "bool", "one JSON line per event on standard output "
                            "(for pipelines) instead of the progress bar",
                            fronts=frozenset({CLI}))


@dataclass(frozen=True)
class WandOptions:
    """The magic wand: spreading an edit made at one frame (see :mod:`sp_core.falloff`)."""

    frame: int | None = option(None, "int", "the edited frame", nullable=True, unit="frame",
                               fronts=frozenset({CLI}), metavar="F")
    edit: str | None = option(None, "path", '{"offsets": {"Node.Zrotation": 20, ...}} added '
                              "at --frame", nullable=True, suffix=".json",
                              fronts=frozenset({CLI}), metavar="EDIT.json")
    edited_bvh: str | None = option(None, "path", "the edited pose is this file's --frame",
                                    nullable=True, suffix=".bvh", fronts=frozenset({CLI}),
                                    metavar="E.bvh")
    sigma: float | None = option(None, "float", "how alike two poses must be to share the edit "
                                 "(kernel width; default: adapted to the motion); well under "
                                 "it few poses are alike and the edit follows the timeline, "
                                 "wider (a region keeps it short)",
                                 low=1e-6, high=1e6, nullable=True, unit="pose units",
                                 metavar="S")
    eigen: int = option(12, "int", "eigenpairs of the Green's function", low=2, high=500,
                        metavar="M")
    mode: str = option("local", "choice", "local: follow the motion; global: reach every "
                       "similar pose", choices=WAND_MODES)


GROUPS: dict[str, type] = {
    "input": InputOptions, "analysis": AnalysisOptions, "keys": KeyOptions, "fit": FitOptions,
    "layer": LayerOptions, "output": OutputOptions, "batch": BatchOptions, "wand": WandOptions,
}


@dataclass(frozen=True)
class Options:
    """Every option of a job, in groups (each frozen; change with :meth:`replace`)."""

    input: InputOptions = field(default_factory=InputOptions)
    analysis: AnalysisOptions = field(default_factory=AnalysisOptions)
    keys: KeyOptions = field(default_factory=KeyOptions)
    fit: FitOptions = field(default_factory=FitOptions)
    layer: LayerOptions = field(default_factory=LayerOptions)
    output: OutputOptions = field(default_factory=OutputOptions)
    batch: BatchOptions = field(default_factory=BatchOptions)
    wand: WandOptions = field(default_factory=WandOptions)

    def replace(self, **changes: Any) -> Options:
        """A copy with fields changed by their (unique) names, each value checked."""
        return build(changes, base=self)

    def to_dict(self, groups: Iterable[str] = tuple(GROUPS)) -> dict[str, dict[str, Any]]:
        """JSON-ready ``{group: {field: value}}`` of ``groups`` (default all; output files
        carry the groups that decide their result)."""
        record: dict[str, dict[str, Any]] = {}
        for group in groups:
            values = getattr(self, group)
            record[group] = {f.name: _plain(getattr(values, f.name)) for f in fields(values)}
        return record

    def digest(self, groups: Iterable[str] = ("input", "analysis", "keys", "fit")) -> str:
        """A short hash of the options that change a result (for batch manifests)."""
        text = json.dumps(self.to_dict(groups), sort_keys=True)
        return hashlib.sha256(text.encode()).hexdigest()[:16]


def _plain(value: Any) -> Any:
    if isinstance(value, Pin):
        return dataclasses.asdict(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    return value


# ------------------------------------------------------------------------------- the fields
@functools.cache  # the schema is fixed; a command line asks it hundreds of times at start
def field_specs() -> Mapping[str, tuple[str, Spec]]:
    """``{field name: (group, spec)}`` over every group (read-only); field names are
    unique."""
    found: dict[str, tuple[str, Spec]] = {}
    for group, cls in GROUPS.items():
        for f in fields(cls):
            if f.name in found:  # pragma: no cover - guarded by a test
                raise TypeError(f"option {f.name!r} is declared twice")
            found[f.name] = (group, f.metadata["spec"])
    return MappingProxyType(found)


def words_of(name: str) -> str:
    """An option's field name in words (``max span``): how a front without a label of its
    own names it to a user."""
    return name.replace("_", " ")


def flag_of(name: str) -> str:
    spec = field_specs()[name][1]
    return spec.flag or "--" + name.replace("_", "-")


def default_of(name: str) -> Any:
    group, _ = field_specs()[name]
    return next(f.default for f in fields(GROUPS[group]) if f.name == name)


def coerce(name: str, value: Any, label: str | None = None) -> Any:
    """``value`` converted to option ``name``'s type and checked against its range.

    Parameters
    ----------
    name : str
        Field name.
    value : Any
        A Python value, or the text typed on a command line or read from a preset.
    label : str, optional
        How the option is named in messages (default the field name; the CLI passes its flag).

    Raises
    ------
    OptionError
        One line naming the option, what it takes and the value given.
    """
    specs = field_specs()
    if name not in specs:
        raise unknown_option(name, specs)
    spec = specs[name][1]
    label = label or name
    # (an empty path is refused, not "none": `--bvh "$OUT"` with OUT unset wrote nothing and
    # exited 0)
    if value is None or (isinstance(value, str) and value == "" and spec.nullable
                         and spec.kind not in ("str", "path")):
        if spec.nullable:
            return None
        raise OptionError(f"{label} needs a value")
    convert = _CONVERTERS[spec.kind]
    return convert(spec, label, value)


def _fail(label: str, wants: str, value: Any) -> OptionError:
    shown = value if isinstance(value, str) else repr(value)
    return OptionError(f"{label} must be {wants}, got {shown}")


#: The largest size of a whole-number option (frames, counts): a frame of 10^20 was taken and
#: overflowed the engine's arrays in the middle of a run.
WHOLE_LIMIT = 10**9


def _number(spec: Spec, label: str, value: Any, whole: bool) -> int | float:
    wants = "a whole number" if whole else "a number"
    if spec.bounds_text():
        wants += " " + spec.bounds_text()
    given = value  # messages show the value as it was typed or passed
    too_big = f"{wants} of at most {WHOLE_LIMIT:,} in size"
    if isinstance(value, bool):
        raise _fail(label, wants, given)
    if isinstance(value, str):
        try:
            value = int(value) if whole else float(value)
        except ValueError:
            raise _fail(label, wants, given) from None
    try:
        number = float(value)
    except OverflowError:  # (a whole number past a float's range)
        raise _fail(label, too_big, given) from None
    except (TypeError, ValueError):
        raise _fail(label, wants, given) from None
    if not math.isfinite(number) or (whole and number != int(number)):
        raise _fail(label, wants, given)
    if whole and not isinstance(value, int) and not hasattr(value, "__index__"):
        raise _fail(label, wants, given)  # 3.0 is a float: frames and counts are whole
    if whole:  # exact (through a float, 9007199254740993 became ...992), and of a size the
        number = operator.index(value)  # engine's int64 arrays and its hosts can take
        if abs(number) > WHOLE_LIMIT:
            raise _fail(label, too_big, given)
    low, high = spec.low, spec.high
    if (low is not None and (number < low or (spec.low_open and number == low))) or \
            (high is not None and (number > high or (spec.high_open and number == high))):
        raise _fail(label, wants, given)
    return int(number) if whole else number


def _int(spec: Spec, label: str, value: Any) -> int:
    return int(_number(spec, label, value, whole=True))


def _float(spec: Spec, label: str, value: Any) -> float:
    return float(_number(spec, label, value, whole=False))


def _bool(spec: Spec, label: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("true", "yes", "on", "1", "false", "no",
                                                    "off", "0"):
        return value.lower() in ("true", "yes", "on", "1")
    raise _fail(label, "true or false", value)


def _str(spec: Spec, label: str, value: Any) -> str:
    if not isinstance(value, str) or not value.strip():
        raise _fail(label, "a non-empty name", value if value != "" else "''")
    return value.strip()


def _choice(spec: Spec, label: str, value: Any) -> str:
    allowed = spec.allowed()
    if value not in allowed:
        raise _fail(label, "one of " + ", ".join(allowed), value)
    return str(value)


def _path(spec: Spec, label: str, value: Any) -> str:
    kind = "folder" if spec.metavar == "DIR" else "file"
    if not isinstance(value, (str, Path)):
        raise _fail(label, f"a {kind} name", value)
    if not str(value):
        raise _fail(label, f"a {kind} name", "an empty path")
    text = str(value)
    if text == "-" and not spec.stdout:
        raise _fail(label, f"a {kind} name ('-', standard output, is for the JSON only)", text)
    if spec.suffix and text != "-" and not text.lower().endswith(spec.suffix):
        raise _fail(label, f"a {spec.suffix} file name", text)
    return text


def _items(value: Any) -> list[Any]:
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",")]
        if value.strip() and not all(items):  # ("0,,89" was taken as "0,89")
            raise TypeError
        return [v for v in items if v]
    if isinstance(value, (list, tuple)):
        return list(value)
    if getattr(value, "ndim", None) == 1 and hasattr(value, "tolist"):
        # a numpy vector (what SelectionSpace.keyframes returns: frames=space.keyframes(k)
        # was refused)
        return list(value.tolist())
    raise TypeError


def _names(spec: Spec, label: str, value: Any) -> tuple[str, ...]:
    wants = "node names separated by commas"
    try:
        names = _items(value)
    except TypeError:
        raise _fail(label, wants, value) from None
    if not all(isinstance(n, str) and n.strip() for n in names):
        raise _fail(label, wants, value)
    if not names and spec.nullable:  # "none given" is spelled None, not an empty list
        raise _fail(label, "at least one node name", value if value != "" else "''")
    return tuple(dict.fromkeys(n.strip() for n in names))


def _frames(spec: Spec, label: str, value: Any) -> tuple[int, ...]:
    wants = "whole frame numbers separated by commas"
    try:
        items = _items(value)
    except TypeError:
        raise _fail(label, wants, value) from None
    frames = []
    for item in items:
        try:
            frames.append(_number(Spec("int", ""), label, item, whole=True))
        except OptionError:
            raise _fail(label, wants, value) from None
    if not frames and spec.nullable:
        raise _fail(label, "at least one frame", value if value != "" else "''")
    twice = sorted(f for f, n in Counter(frames).items() if n > 1)
    if twice:  # a typo more likely than a wish (the order does not matter: sorted)
        raise OptionError(f"{label} lists frame{'s' * (len(twice) > 1)} "
                          f"{', '.join(map(str, twice))} twice; give each frame once")
    return tuple(sorted(int(f) for f in frames))


def _pins(spec: Spec, label: str, value: Any) -> tuple[Pin, ...]:
    if isinstance(value, (list, tuple)) and value and all(
            isinstance(p, (Pin, Mapping)) for p in value):
        pins = []
        for p in value:
            pin = p if isinstance(p, Pin) else Pin(**dict(p))
            frame = _frames(spec, label, [pin.frame])[0]
            pins.append(Pin(frame, str(pin.name), str(pin.note)))
        _frames(spec, label, [pin.frame for pin in pins])  # a frame pinned twice is refused
        return tuple(sorted(pins, key=lambda p: p.frame))
    return tuple(Pin(f) for f in _frames(spec, label, value))


def _range(spec: Spec, label: str, value: Any) -> tuple[int, int]:
    wants = "START:END host frames with END > START"
    typed = value  # (the message shows it as typed, not as the pair it was split into)
    if isinstance(value, str):
        start, sep, end = value.partition(":")
        if not sep:
            raise _fail(label, wants, value)
        value = (start.strip(), end.strip())
    try:
        start, end = value
        bounds = (_number(Spec("int", ""), label, start, whole=True),
                  _number(Spec("int", ""), label, end, whole=True))
    except (TypeError, ValueError, OptionError):
        raise _fail(label, wants, typed) from None
    if bounds[1] <= bounds[0]:
        raise _fail(label, wants, f"{bounds[0]}:{bounds[1]}")
    return int(bounds[0]), int(bounds[1])


def _weights(spec: Spec, label: str, value: Any) -> tuple[tuple[str, float], ...]:
    wants = ("NODE=WEIGHT pairs (each node once, weights from 0 to 1e6) separated by "
             "commas")
    pairs: list[tuple[str, Any]] = []
    if isinstance(value, Mapping):
        pairs = list(value.items())
    elif isinstance(value, str):
        items = value.split(",") if value.strip() else []
        if not all(v.strip() for v in items):  # (an empty pair: "Head=2,,Hips=1")
            raise _fail(label, wants, value)
        for item in items:
            name, sep, number = item.partition("=")
            if not sep or not name.strip():
                raise _fail(label, wants, value)
            pairs.append((name.strip(), number))
    elif isinstance(value, (list, tuple)):
        pairs = [tuple(p) for p in value]
    else:
        raise _fail(label, wants, value)
    weights = {}
    for name, number in pairs:
        if str(name) in weights:  # (the last one silently won)
            raise _fail(label, wants, value)
        try:
            # (1e200 overflowed the squared distances: every K looked alike)
            weights[str(name)] = _number(Spec("float", "", low=0.0, high=1e6), label, number,
                                         whole=False)
        except OptionError:
            raise _fail(label, wants, value) from None
    return tuple(weights.items())


def _mapping(spec: Spec, label: str, value: Any) -> tuple[tuple[str, Any], ...]:
    if isinstance(value, str):  # typed on a command line as JSON
        try:
            value = json.loads(value)
        except json.JSONDecodeError:
            raise _fail(label, 'a JSON object such as {"name": 1}', value) from None
    if isinstance(value, Mapping):
        return tuple(sorted(value.items()))
    if isinstance(value, (list, tuple)) and all(isinstance(p, (list, tuple)) and len(p) == 2
                                                for p in value):
        return tuple(sorted((str(k), v) for k, v in value))
    raise _fail(label, "a mapping of option names to values", value)


def _tolerance(spec: Spec, label: str, value: Any) -> tuple[float, float]:
    wants = "MEAN,MAX millimetres, both > 0 and MEAN <= MAX"
    try:
        items = _items(value)
        mean, worst = (_number(Spec("float", "", low=0.0, low_open=True), label, v, whole=False)
                       for v in items) if len(items) == 2 else (None, None)
    except (TypeError, OptionError):
        raise _fail(label, wants, value) from None
    if mean is None or worst is None or mean > worst:
        raise _fail(label, wants, value)
    return float(mean), float(worst)


def _budget(spec: Spec, label: str, value: Any) -> str:
    wants = "a whole number of keys >= 0 or a percentage in [0, 100] such as 2%"
    if isinstance(value, bool):
        raise _fail(label, wants, value)
    text = str(value).strip() if isinstance(value, (str, int)) else None
    if text is None:
        raise _fail(label, wants, value)
    try:
        if text.endswith("%"):
            percent = float(text[:-1])
            if not (math.isfinite(percent) and 0.0 <= percent <= 100.0):
                raise ValueError
            return f"{percent:g}%"
        keys = int(text)
    except ValueError:
        raise _fail(label, wants, value) from None
    if keys < 0:
        raise _fail(label, wants, value)
    return str(keys)


_CONVERTERS: dict[str, Callable[[Spec, str, Any], Any]] = {
    "int": _int, "float": _float, "bool": _bool, "str": _str, "choice": _choice,
    "path": _path, "names": _names, "frames": _frames, "pins": _pins, "range": _range,
    "weights": _weights, "mapping": _mapping, "tolerance": _tolerance, "budget": _budget,
}


# ------------------------------------------------------------------------------- building
def build(values: Mapping[str, Any], base: Options | None = None,
          labels: Mapping[str, str] | None = None) -> Options:
    """Options from ``{field: value}`` (flat, or ``{group: {field: value}}`` as in presets and
    output JSON) over ``base``; every value checked, then the combination (:func:`check`). A
    choice of the keys in ``values`` (``keys``, ``ratio``, ``suggested``, ``tolerance``,
    ``frames``) replaces the base's.

    Raises
    ------
    OptionError
        An unknown name, a bad value or a combination that cannot be honoured.
    """
    flat = flatten(values)
    specs = field_specs()
    labels = labels or {}
    grouped: dict[str, dict[str, Any]] = {}
    for name, value in flat.items():
        if name not in specs:
            raise unknown_option(name, specs)
        grouped.setdefault(specs[name][0], {})[name] = coerce(name, value, labels.get(name))
    base = base or Options()
    if any(value not in (None, False) for value in grouped.get("keys", {}).values()):
        # one option chooses the keys: a choice made here replaces the base's (a preset's, or
        # an earlier one's) instead of meeting it; two in ``values`` are still refused
        base = dataclasses.replace(base, keys=KeyOptions())
    changes = {group: dataclasses.replace(getattr(base, group), **values)
               for group, values in grouped.items()}
    options = dataclasses.replace(base, **changes)
    check(options, labels)
    return options


def flatten(values: Mapping[str, Any]) -> dict[str, Any]:
    """``{group: {field: value}}`` or flat ``{field: value}`` → flat.

    Raises
    ------
    OptionError
        A group holds an option of another group (``[fit] keys = 30``: a preset written by
        hand, whose author may expect the group to mean something).
    """
    flat: dict[str, Any] = {}
    specs = field_specs()
    for key, value in values.items():
        if key in GROUPS and isinstance(value, Mapping):
            for name in value:
                home = specs[name][0] if name in specs else key
                if home != key:
                    raise OptionError(f"option {name!r} belongs to [{home}], not [{key}]; "
                                      "move it there (or write the options without groups)")
            flat.update(value)
        else:
            flat[key] = value
    return flat


def check(options: Options, labels: Mapping[str, str] | None = None) -> None:
    """Refuse combinations that cannot all be honoured (nothing is silently ignored)."""
    labels = labels or {}

    def name(field_name: str) -> str:
        return labels.get(field_name, field_name)

    keys, analysis = options.keys, options.analysis
    # the default tolerance gives way to any other choice; a tolerance given does not
    chosen = [f for f in ("keys", "ratio", "tolerance", "frames")
              if getattr(keys, f) is not None
              and (f != "tolerance" or keys.tolerance != DEFAULT_TOLERANCE)]
    if keys.suggested:
        chosen.append("suggested")
    if len(chosen) > 1:
        raise OptionError(f"{name(chosen[0])} and {name(chosen[1])} both choose the keys; "
                          "give one")
    if keys.frames is not None:
        if len(keys.frames) < 2:
            raise OptionError(f"{name('frames')} needs at least 2 frames (the first and last "
                              f"bound the range), got {len(keys.frames)}")
        for other in ("pins", "frame_range", "layered"):
            if getattr(analysis, other) not in (None, (), False):
                raise OptionError(f"{name('frames')} gives the keys itself: {name(other)} "
                                  "cannot apply; drop one of them")
    if analysis.leading and not analysis.layered:
        raise OptionError(f"{name('leading')} is used only with {name('layered')}; add "
                          f"{name('layered')} or drop {name('leading')}")
    if analysis.layered and keys.tolerance not in (None, DEFAULT_TOLERANCE):
        raise _not_layered("tolerance", name)
    if analysis.layered:
        defaults = AnalysisOptions()
        for other in _NOT_LAYERED:
            if getattr(analysis, other) != getattr(defaults, other):
                raise _not_layered(other, name)
    if analysis.max_keys is not None and keys.keys is not None and keys.keys > analysis.max_keys:
        raise OptionError(f"{name('keys')} {keys.keys} is more than {name('max_keys')} "
                          f"{analysis.max_keys}; raise {name('max_keys')} or ask for fewer keys")


#: Analysis options the layered mode has no use for.
_NOT_LAYERED = ("pins", "cost", "cost_options", "compose", "max_span", "max_keys", "time_scale")


def _not_layered(option: str, name: Callable[[str], str]) -> OptionError:
    """The refusal of ``option`` (a tolerance, or one of :data:`_NOT_LAYERED`) with the
    layered mode; ``name`` labels options (flags on a command line)."""
    if option == "tolerance":
        return OptionError(f"{name('tolerance')} does not apply with {name('layered')} "
                           f"(keyposes and breakdowns have their own rules; {name('keys')} or "
                           f"{name('ratio')} sets the keyposes); drop one of them")
    return OptionError(f"{name(option)} is not supported with {name('layered')} (keyposes and "
                       "breakdowns use their own costs and no constraints); drop one of them")


#: Analysis options that act with ``frames`` too (the hierarchy read); the rest choose keys.
_READ_WITH_FRAMES = frozenset({"roots"})


def check_given(options: Options, given: Iterable[str],
                labels: Mapping[str, str] | None = None) -> None:
    """Refuse options ``given`` explicitly (a command line's flags) that the other options
    leave with nothing to do: an analysis option with ``frames`` (no analysis runs),
    ``smoothness`` without the smooth tangents, the world fit's ``world_iterations`` and
    ``objective`` with the channel fit, the layered mode's unused analysis options and
    tolerance (even at their defaults), the local pool's ``workers`` with a ``scheduler``
    (a preset's ``workers`` under a ``--scheduler`` flag is the default again). :func:`check`
    does not refuse these: a panel's stored settings keep such values for when they apply
    again.
    Of the outputs: ``linear`` without a ``plot``, and ``tree`` (printed with the summary) when
    the JSON goes to standard output instead of the summary (the JSON holds the hierarchy).
    """
    labels = labels or {}
    given = set(given)

    def name(field_name: str) -> str:
        return labels.get(field_name, field_name)

    if options.keys.frames is not None:
        unused = [f.name for f in fields(AnalysisOptions)
                  if f.name in given and f.name not in _READ_WITH_FRAMES]
        if unused:
            raise OptionError(f"{name('frames')} gives the keys itself: {name(unused[0])} "
                              "cannot apply; drop one of them")
    if options.analysis.layered:  # (check() refuses the values other than the defaults)
        if "tolerance" in given and options.keys.tolerance is not None:
            raise _not_layered("tolerance", name)
        for other in _NOT_LAYERED:
            if other in given:
                raise _not_layered(other, name)
    fit = options.fit
    if "smoothness" in given and fit.tangents != "smooth":
        raise OptionError(f"{name('smoothness')} applies to the smooth tangents only "
                          f"({name('tangents')} smooth); drop it or add that")
    if fit.space == "channel":
        for other in ("world_iterations", "objective"):
            if other in given:
                raise OptionError(f"{name(other)} applies to the world fit only; drop it or "
                                  f"fit in world space ({name('space')} world)")
    if "workers" in given and options.batch.scheduler is not None:
        raise OptionError(f"{name('workers')} sizes the local process pool; with "
                          f"{name('scheduler')} the cluster's workers run the takes (local:N "
                          "starts N); drop one of them")
    out = options.output
    if "linear" in given and out.plot is None:
        raise OptionError(f"{name('linear')} sets the error axis of {name('plot')}, which is "
                          f"not given; add {name('plot')} OUT.png or drop it")
    if "tree" in given and out.json == "-":
        raise OptionError(f"{name('tree')} prints the hierarchy with the summary, which "
                          f"{name('json')} - replaces (its JSON holds the hierarchy: nodes and "
                          "parents); drop one of them")


# ------------------------------------------------------------------------------- the K rule
def candidate_count(first: int, last: int, stride: int) -> int:
    """Candidate keyframes of a range: frames divisible by ``stride`` plus the first and last."""
    inner = [f for f in (first, last) if f % stride != 0]
    return (last // stride - (first - 1) // stride) + len(inner)


def key_choice(options: Options) -> str:
    """Which option chooses K: ``frames``, ``keys``, ``ratio``, ``suggested`` (the threshold
    rule; also layered selections, which have their own rules) or ``tolerance`` (the
    default)."""
    keys = options.keys
    for name in ("frames", "keys", "ratio"):
        if getattr(keys, name) is not None:
            return name
    if keys.suggested or keys.tolerance is None or options.analysis.layered:
        return "suggested"
    return "tolerance"


def corrective_plan(options: Options) -> tuple[str | None, float | None]:
    """The corrective budget to spend and the max error (mm at 1.7 m) at which to stop.

    An explicit ``corrective_budget`` is spent (stopping at the tolerance's max when the
    tolerance chooses K); without one, a tolerance choosing K may spend up to
    :data:`AUTOMATIC_CORRECTIVE_SHARE` of the original keys, and other choices spend none.
    """
    budget = options.fit.corrective_budget
    by_tolerance = key_choice(options) == "tolerance"
    stop = options.keys.tolerance[1] if by_tolerance and options.keys.tolerance else None
    if budget is None and by_tolerance:
        budget = f"{100 * AUTOMATIC_CORRECTIVE_SHARE:g}%"
    return budget, stop


def k_for(options: Options, first: int, last: int) -> int | None:
    """The K the options ask for on host frames ``first..last`` (None: the suggested K, known
    after the analysis).

    ``keys`` is taken as given; ``ratio`` gives ``max(2, round(ratio × frames))``, rounded half
    up (0.05 of 90 frames, 4.5, is 5). Either must
    fit the range: at least 2 plus the pins inside it, at most its candidate frames.

    Raises
    ------
    OptionError
        K outside what the range can hold (the message gives the limits).
    """
    keys, analysis = options.keys, options.analysis
    n = last - first + 1
    if keys.keys is not None:
        wanted, label = keys.keys, "keys"
    elif keys.ratio is not None:
        # half up, as the docs' round() reads (Python's round() takes 4.5 to 4); the product
        # is first rounded to 9 decimals so that 0.07 x 50 (3.5000000000000004) and a ratio
        # whose binary value lies just below the half (2.4999999999999996) round as written
        wanted, label = max(2, math.floor(round(keys.ratio * n, 9) + 0.5)), "ratio"
    else:
        return None
    if analysis.layered:
        return wanted
    pins = {p.frame for p in analysis.pins if first < p.frame < last}
    low = 2 + len(pins)
    high = candidate_count(first, last, analysis.stride)
    if not low <= wanted <= high:
        # (named by the option's field: a front says it as its flag or label, so the rest of
        # the message does not use the word)
        asked = f"{label} {keys.keys}:" if label == "keys" \
            else f"{label} {keys.ratio} asks for {wanted} keyframes, but"
        raise OptionError(f"{asked} frames {first}..{last} hold {low} to {high} keyframes "
                          f"(first and last{', the pins' if pins else ''}; {high} candidate "
                          f"frames at stride {analysis.stride})", options=(label,))
    return wanted


def max_keys_for(options: Options, wanted: int | None,
                 whole: tuple[int, int] | None = None) -> int | None:
    """The ``max_keys`` an analysis needs to offer K = ``wanted``: the option's, raised to
    ``wanted``; unset, ``wanted`` (the space then needs no more: a long take's analysis stays
    exact for a small K).

    ``whole``, the host frames ``(first, last)`` of a space shown whole (a panel's graph):
    unset stays unset (the space's default, half the candidate frames) unless ``wanted`` is
    more than that; a K picked on the graph must not cap the next analysis's graph at it.
    """
    current = options.analysis.max_keys
    if wanted is None:
        return current
    if current is None:
        # (pins only add candidates: half the stride's frames is at most the space's default)
        if whole is not None and \
                wanted <= candidate_count(*whole, options.analysis.stride) // 2:
            return None
        return wanted
    return max(current, wanted)


def time_budget_for(options: Options, n_frames: int) -> float:
    """Seconds an analysis of ``n_frames`` frames may take by its time estimate (see
    ``time_budget``): the option, else 1.5 s plus 0.25 s per 1,000 frames, so takes of up to
    about 4,000 frames stay exact with the default cost (3,100 with ``line-max``) and longer
    ones grow linearly in time."""
    given = options.analysis.time_budget
    return float(given) if given is not None else 1.5 + 0.25 * n_frames / 1000.0


def unknown_option(name: str, specs: Mapping[str, Any]) -> OptionError:
    """The error for an option name the schema does not have, with the nearest names (a
    preset's ``range`` is ``frame_range``)."""
    near = difflib.get_close_matches(name, list(specs), n=1)
    meant = f" (did you mean {near[0]!r}?)" if near else ""
    return OptionError(f"unknown option {name!r}{meant}; options are "
                       f"{', '.join(sorted(specs))}")


# --------------------------------------------------------------------------- presets, CLI
def load_preset(path: str | Path) -> dict[str, Any]:
    """Read a preset (``.toml`` or ``.json``): ``{group: {field: value}}`` or flat, or the
    ``options`` block of an analysis or reduction JSON this tool wrote."""
    path = Path(path)
    if path.suffix.lower() not in (".toml", ".json"):  # (a .yaml file was read as JSON)
        raise OptionError(f"preset {path}: a preset is a .toml or .json file")
    try:
        # (utf-8-sig: a byte-order mark, which Windows editors write, is no statement)
        text = path.read_text(encoding="utf-8-sig")
        # (TOML refuses a key given twice; JSON would keep the last one without a word)
        record = tomllib.loads(text) if path.suffix.lower() == ".toml" \
            else json.loads(text, object_pairs_hook=functools.partial(_once_each, path))
    except OSError as exc:
        raise OptionError(f"cannot read preset {path}: {exc.strerror}") from None
    except UnicodeDecodeError as exc:  # (it was an internal error)
        raise OptionError(f"{path}: not a {path.suffix[1:].upper()} preset: not UTF-8 text "
                          f"(byte {exc.start})") from None
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise OptionError(f"{path}: not a valid {path.suffix[1:].upper()} preset: {exc}") \
            from None
    if not isinstance(record, dict):
        raise OptionError(f"{path}: a preset is a table of options")
    if isinstance(record.get("options"), dict) and "clip" in record:
        # an analysis or reduction JSON of this tool: its options block is the preset (the
        # file itself was refused as "unknown option 'clip'")
        return dict(record["options"])
    return record


def _once_each(path: Path, pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """A JSON object of a preset, refused when it names a key twice."""
    seen = Counter(key for key, _ in pairs)
    twice = [key for key, n in seen.items() if n > 1]
    if twice:
        raise OptionError(f"{path}: {', '.join(repr(k) for k in twice)} given twice in one "
                          "table; give each option once")
    return dict(pairs)


def preset_options(path: str | Path) -> Options:
    """The defaults with the options of the preset at ``path`` (:func:`load_preset`).

    Raises
    ------
    OptionError
        The file cannot be read or holds a value the schema refuses; the message starts with
        the preset's path (a command line's flags may be at fault too).
    """
    record = load_preset(path)
    try:
        given = flatten(record)
    except OptionError as exc:  # (an option in another option's group)
        raise OptionError(f"preset {path}: {exc}") from None
    if "overwrite" in given:
        # (the guide: existing files are kept unless *you* add --overwrite)
        raise OptionError(f"preset {path}: overwrite is not taken from a preset (a shared "
                          "preset would replace files for everyone who uses it); add "
                          "--overwrite to the command")
    specs = field_specs()
    written = [name for name in given if name in specs
               and specs[name][0] in ("output", "batch") and specs[name][1].kind == "path"]
    if written:
        # (else a command without that output dropped it without a word, and one with it
        # refused the file as if its flag had been typed)
        name = written[0]
        raise OptionError(f"preset {path}: {name} is a file a command writes, not an option a "
                          "preset shares (everyone who uses it would write the same file); "
                          f"give {flag_of(name)} on the command line")
    try:
        return Options().replace(**record)
    except OptionError as exc:
        # (its options named as the preset names them: by field, not by flag)
        raise OptionError(f"preset {path}: {exc}") from None


def preset_text(options: Options, groups: Sequence[str] = ("analysis", "keys", "fit", "layer")
                ) -> str:
    """``options`` as TOML a TD can share (only values that differ from the defaults)."""
    import tomli_w

    defaults = Options().to_dict()
    record = options.to_dict()
    table = {g: {k: v for k, v in record[g].items() if v != defaults[g][k] and v is not None}
             for g in groups}
    return tomli_w.dumps({g: t for g, t in table.items() if t})


def add_arguments(parser: argparse.ArgumentParser, names: Sequence[str],
                  required: Sequence[str] = (), front: str = CLI) -> None:
    """Add the flags of option fields ``names`` to ``parser``, grouped as in the schema
    (``front``: the front end the parser belongs to, :data:`CLI` or :data:`HOST` batches).

    Values are parsed later by :func:`from_arguments` (so every bad value gets the schema's
    message); unset flags stay absent.
    """
    specs = field_specs()
    groups: dict[str, argparse._ArgumentGroup] = {}
    exclusive = None
    for name in names:
        group, spec = specs[name]
        if front not in spec.fronts:
            raise TypeError(f"option {name!r} does not reach the {front} front end")
        if group not in groups:
            groups[group] = parser.add_argument_group(group)
        target: Any = groups[group]
        if group == "keys" and name in ("keys", "ratio", "tolerance", "suggested", "frames"):
            exclusive = exclusive or groups[group].add_mutually_exclusive_group()
            target = exclusive
        text = spec.help
        if spec.unit:
            text += f" ({spec.unit})"
        default = default_of(name)
        if spec.kind == "tolerance" and default is not None:
            text += f" [default {default[0]:g},{default[1]:g}]"
        elif default not in (None, (), False) and spec.kind != "bool":
            text += f" [default {_plain(default)}]"
        if spec.kind == "choice":
            text += f"; one of {', '.join(spec.allowed())}" if len(spec.allowed()) > 4 else ""
        # argparse expands %-formats in help texts: a literal % (as in "5%") must be doubled
        kwargs: dict[str, Any] = {"dest": name, "help": text.replace("%", "%%"),
                                  "default": argparse.SUPPRESS}
        if spec.kind == "bool":
            kwargs["action"] = "store_true"
        else:
            kwargs["metavar"] = spec.metavar or name.upper()
            if spec.kind == "choice":
                kwargs["metavar"] = "{" + ",".join(spec.allowed()) + "}"
            if name in required:
                kwargs["required"] = True
        target.add_argument(flag_of(name), **kwargs)


def host_fields(groups: Sequence[str] = ("analysis", "keys", "fit", "layer", "output", "batch")
                ) -> list[str]:
    """Fields that reach the host APIs and batches (:data:`HOST`), in schema order."""
    return [n for n, (g, spec) in field_specs().items() if g in groups and HOST in spec.fronts]


def from_arguments(namespace: argparse.Namespace, names: Sequence[str],
                   base: Options | None = None) -> Options:
    """Options from parsed flags (only those given), over a preset and the defaults."""
    given = {n: getattr(namespace, n) for n in names if hasattr(namespace, n)}
    # a flag typed with an empty value is a mistake (`--frames "$KEYS"` with KEYS unset ran
    # the default tolerance search), not "none": the panels' empty fields mean that
    # (an empty path has its own words, "must be a file name, got an empty path")
    specs = field_specs()
    empty = [n for n, value in given.items() if isinstance(value, str) and not value.strip()
             and specs[n][1].kind != "path"]
    if empty:
        raise OptionError(f"{flag_of(empty[0])} needs a value, got an empty one")
    return build(given, base=base, labels={n: flag_of(n) for n in field_specs()})


def keyword_options(**given: Any) -> Options:
    """The options a script gives by keyword (the hosts' Python APIs): the defaults with
    ``given``, held to what a command line's flags are (:func:`check_given`: ``smoothness``
    without the smooth tangents was dropped without a word where the command line refuses it).

    Raises
    ------
    OptionError
        A bad value, an unknown option, or one the others leave with nothing to do.
    """
    options = Options().replace(**given)
    check_given(options, given)
    return options


def applied(options: Options, names: Iterable[str] | None = None) -> Options:
    """``options`` with each of ``names`` (default every field) that the others leave with
    nothing to do (what :func:`check_given` refuses of a flag: a panel keeps such a value
    greyed for when it applies again) put back to its default: what an output records of its
    options, a block that is itself a preset giving the same result."""
    for name in field_specs() if names is None else names:
        try:
            check_given(options, [name])
        except OptionError:
            options = options.replace(**{name: default_of(name)})
    return options


def command_line_options(namespace: argparse.Namespace, names: Sequence[str],
                         preset: str | Path | None = None) -> Options:
    """The options of a command line (``salient-poses``, the in-host batches): the defaults,
    the preset at ``preset`` (if any), then the flags given among ``names``.

    Beyond :func:`check`, everything a command line holds must apply: the preset's own values
    (those that differ from the defaults: an output's options block holds every field) and
    the flags given are refused where the other options leave them nothing to do
    (:func:`check_given`; a flag that overrides the preset may leave one of its values
    unused: that value is the default again), and the layered mode needs its leading part
    (the panel lets one tick the mode before choosing the nodes; a command line has both at
    once).

    Raises
    ------
    OptionError
        A bad value or combination; one in the preset alone starts with its path.
    """
    labels = {n: flag_of(n) for n in field_specs()}
    base = None
    own: list[str] = []
    if preset:
        base = preset_options(preset)
        if base.keys.frames is not None and "frames" not in names:
            # a shared preset's keys, for reduce: a command without --frames (analyze) must
            # not skip its analysis for them
            base = base.replace(frames=None)
        defaults = Options()
        own = [f.name for group in GROUPS for f in fields(GROUPS[group])
               if getattr(getattr(base, group), f.name)
               != getattr(getattr(defaults, group), f.name)]
        try:
            check_given(base, own)
        except OptionError as exc:
            raise OptionError(f"preset {preset}: {exc}") from None
        if getattr(namespace, "frames", None) is not None:
            # --frames gives the keys itself: the preset's analysis has nothing to do (its
            # range, pins or layered mode were refused, named as flags never typed)
            unused = [f.name for f in fields(AnalysisOptions) if f.name in own
                      and f.name not in _READ_WITH_FRAMES]
            base = base.replace(**{name: default_of(name) for name in unused})
    options = from_arguments(namespace, names, base=base)
    typed = [n for n in names if hasattr(namespace, n)]
    if "workers" in typed and "scheduler" in own and "scheduler" not in typed:
        # --workers over a preset's scheduler: the local pool runs the takes (the reverse, a
        # preset's workers under --scheduler, is applied() below)
        options = options.replace(scheduler=None)
    check_given(options, typed, labels)
    # a preset's value that a flag leaves with nothing to do is the default again
    options = applied(options, [name for name in own if name not in typed])
    if options.analysis.layered and not options.analysis.leading:
        raise OptionError(f"{labels['layered']} needs {labels['leading']} NODE,... (the part "
                          "whose extremes are the keyposes, e.g. "
                          f"{labels['leading']} RightWrist)")
    return options
