"""Autodesk FBX files (binary or ASCII), read through ``ufbx`` into a :class:`~sp_core.clip.Clip`.

One skeleton and one take are read: the skeleton under a root joint (default the file's first
skeleton root) and the take (animation stack; default the active one), sampled at every frame of
the take's time range at the scene frame rate. Values stay in the file's units and axes.

How the FBX transform maps onto the clip
----------------------------------------
ufbx evaluates each node's local transform ``T · Q · S`` per frame, where ``Q = Pre · R · Post⁻¹``
(FBX ``PreRotation``, ``Lcl Rotation`` in the node's rotation order, ``PostRotation``) and ``T``
is the node's origin in its parent (``Lcl Translation`` plus any rotation/scaling offsets and
pivots). The clip keeps ``R`` as the node's rotation channels (degrees, the file's values;
``raw_channels`` before unwrapping) and ``Pre`` as its orient (Maya's ``jointOrient``). A
parent's post-rotation and uniform scale are moved into its children (orient ``Post⁻¹ · Pre``,
translation ``s · Post⁻¹ · T``), which leaves every world position unchanged. The root joint's
position channels are its world position, and the nodes above it (an armature, a reference
null) go into the root's orient. Translation channels exist where the translation varies over
the take (and always on the root); a leaf joint that does not move at all is an End Site.

After building the clip its world positions are compared with ufbx's own evaluated world
transforms at the first, middle and last frame; transforms a clip cannot hold (non-uniform or
animated scale on a joint with children, animated nodes above the root) are refused with a
message, never read wrong.

Every problem raises :class:`~sp_core.errors.ClipFormatError` naming the file.
"""

from __future__ import annotations

import ctypes
import gc
import mmap
import os
import pickle
import re
import struct
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
from scipy.spatial.transform import Rotation

from sp_core.clip import POSITION_ATTRIBUTES, ROTATION_ATTRIBUTES, Clip
from sp_core.errors import ClipFormatError
from sp_core.io.bvh import fps_from_frame_time

_PathLike = str | os.PathLike[str]
_BINARY_MAGIC = b"Kaydara FBX Binary"
# The last 16 bytes of a complete binary FBX file (the footer the FBX SDK and Blender write).
_BINARY_FOOTER = bytes.fromhex("f85a8c6adef5d97eece90ce3758f290b")
#: ufbx RotationOrder values, in enum order (SPHERIC = 6 is refused)
_ORDERS = ("XYZ", "XZY", "YZX", "YXZ", "ZXY", "ZYX")
#: unit lengths (metres) with a name
_UNITS = {0.001: "mm", 0.01: "cm", 0.1: "dm", 1.0: "m", 0.0254: "in", 0.3048: "ft",
          1000.0: "km"}
_AXES = {0: "x", 1: "x", 2: "y", 3: "y", 4: "z", 5: "z"}
#: FBX ``TimeMode`` values (``FbxTime::EMode``: 0 default … 17 eFrames59dot94, 18
#: eFrames119dot88) whose rate is taken exactly here rather than from ufbx: the NTSC rates, which
#: ufbx 0.0.5 has as float literals (29.97, a sample 0.1 frame late an hour into a take; the FBX
#: SDK's frame is ``SECOND / 30 * 1001 / 1000`` ticks, "Frame @ 29.9700299700 Hz" in
#: fbxtimecode.h), and 119.88, which ufbx 0.0.5 does not know and reads as 24 fps.
_EXACT_RATES = {8: 30000 / 1001, 9: 30000 / 1001, 13: 24000 / 1001, 17: 60000 / 1001,
                18: 120000 / 1001}
_LAST_TIME_MODE = 18
#: The take properties that give a take's time span (``AnimationStack`` properties 70).
_SPAN_PROPERTIES = ("LocalStart", "LocalStop", "ReferenceStart", "ReferenceStop")
#: The document property that names the file's active take, as the FBX SDK writes it (and, in a
#: binary file, each of its strings as ``S`` + little-endian uint32 length + bytes).
_ACTIVE_TAKE = b"ActiveAnimStackName"
_ASCII_ACTIVE_TAKE = re.compile(rb'"ActiveAnimStackName"\s*,\s*"KString"\s*,\s*"[^"]*"\s*,'
                                rb'\s*"[^"]*"\s*,\s*"([^"]*)"')
#: What an ASCII FBX file's structure is made of: strings, comments and braces.
_ASCII_TOKENS = re.compile(rb'"[^"]*"|;[^\n]*|[{}]')
# A joint's scale counts as uniform and constant within this relative spread (exporters write
# float32 values such as 0.99999994).
_SCALE_TOLERANCE = 1e-4
# A translation counts as animated beyond this spread over the take, relative to the skeleton's
# size, and a rotation beyond _TURN_TOLERANCE degrees: above the float32 rounding that exporters
# leave in constant curves.
_MOTION_TOLERANCE = 1e-6
_TURN_TOLERANCE = 1e-4


_incref = ctypes.pythonapi.Py_IncRef
_incref.argtypes = [ctypes.py_object]
_incref.restype = None


def _elements(items: Any) -> list[Any]:
    """The ufbx elements (nodes, takes, layers) of a ufbx list, each with a reference added.

    ufbx 0.0.5's binding returns element objects as *borrowed* references (its per-scene cache
    holds the only count, and every access hands that same count out again), so dropping one
    frees it under the cache and a later access or the scene's teardown crashes. Adding a
    reference per access keeps every element alive; this runs only in the child process of
    :func:`_extract_isolated`, which exits without freeing anything.
    """
    out = list(items)
    for item in out:
        if item is not None:
            _incref(item)
    return out


def _ufbx(path: str) -> Any:
    try:
        import ufbx
    except ImportError:
        raise ClipFormatError("reading FBX files needs the 'ufbx' package: run python3 "
                              "install.py --standalone, or pip install ufbx==0.0.5",
                              path) from None
    return ufbx


def unit_name(unit_meters: float) -> str:
    """A readable name for a scene unit given in metres (``0.01`` -> ``"cm"``)."""
    for length, label in _UNITS.items():
        if abs(unit_meters - length) <= 1e-9 * length:
            return label
    return f"{unit_meters:g} m"


def _check_signature(path: str) -> None:
    try:
        with open(path, "rb") as handle:
            head = handle.read(4096)
    except OSError as exc:
        raise ClipFormatError(f"cannot read the file: {exc.strerror or exc}", path) from None
    if not head:
        raise ClipFormatError("the file is empty", path)
    if head.startswith(_BINARY_MAGIC):
        return
    text = head.decode("latin-1")
    if "FBXHeaderExtension" in text or text.lstrip().startswith("; FBX"):
        return
    raise ClipFormatError("not an FBX file: it starts with neither the binary FBX signature "
                          "('Kaydara FBX Binary') nor an ASCII FBX header", path)


def _load(ufbx: Any, path: str) -> Any:
    _check_signature(path)
    try:
        scene = ufbx.load_file(path, ignore_geometry=True, ignore_embedded=True,
                               load_external_files=False, file_format=ufbx.FileFormat.FBX)
    except ufbx.UfbxError as exc:
        if isinstance(exc, ufbx.TruncatedFileError) or _lacks_footer(path) \
                or not _ascii_complete(path):
            raise ClipFormatError(_TRUNCATED, path) from None
        raise ClipFormatError(f"ufbx cannot read this FBX file: {exc}", path) from None
    # ufbx reads a cut ASCII file without a word (a skeleton without the joints whose
    # connections were cut off); a binary one it refuses, or its footer is missing
    if not _ascii_complete(path):
        raise ClipFormatError(_TRUNCATED, path)
    return scene


_TRUNCATED = "the FBX file is truncated (it ends before its data does)"


def _ascii_complete(path: str) -> bool:
    """False for an ASCII FBX file cut short: a block left open, or no ``Connections``
    (the last section FBX 7 writers put before the optional ``Takes``, which joins every
    node to its parent); True for a binary file."""
    with open(path, "rb") as handle:
        if handle.read(len(_BINARY_MAGIC)) == _BINARY_MAGIC:
            return True
        handle.seek(0)
        data = handle.read()
    depth = 0
    for token in _ASCII_TOKENS.finditer(data):
        text = token.group()
        if text == b"{":
            depth += 1
        elif text == b"}":
            depth -= 1
    # (a section's name starts its line, outside any block)
    return depth == 0 and re.search(rb"(?m)^Connections:", data) is not None


def _lacks_footer(path: str) -> bool:
    """A binary FBX file that does not end with the standard footer (cut short)."""
    with open(path, "rb") as handle:
        if not handle.read(len(_BINARY_MAGIC)) == _BINARY_MAGIC:
            return False
        handle.seek(0, os.SEEK_END)
        size = handle.tell()
        handle.seek(max(0, size - len(_BINARY_FOOTER)))
        return handle.read() != _BINARY_FOOTER


def _euler_matrix(order: str, angles: np.ndarray) -> np.ndarray:
    """FBX Euler rotation matrices: order ``"XYZ"`` turns about X first, then Y, then Z, all
    about the parent's axes (extrinsic), i.e. ``R = Rz · Ry · Rx``.

    Parameters
    ----------
    order : str, a permutation of "XYZ"
    angles : (n, 3) float64, degrees, in X, Y, Z component order (as FBX stores them)

    Returns
    -------
    (n, 3, 3) float64
    """
    columns = ["XYZ".index(a) for a in order]
    return Rotation.from_euler(order.lower(), angles[:, columns], degrees=True).as_matrix()


def _matrix(m: Any) -> np.ndarray:
    """ufbx Matrix (4 columns of Vec3) -> (3, 4) float64 affine."""
    return np.array([m.c0, m.c1, m.c2, m.c3], dtype=np.float64).T


class _Scene:
    """The nodes of a loaded scene as plain Python data (ufbx objects are not kept around)."""

    def __init__(self, scene: Any, ufbx: Any) -> None:
        nodes = _elements(scene.nodes)
        index = {n.element_id: i for i, n in enumerate(nodes)}
        self.names = [n.name for n in nodes]
        self.parents = []
        for n in nodes:
            parent = _elements([n.parent])[0]
            self.parents.append(-1 if parent is None else index[parent.element_id])
        bone = ufbx.ElementType.BONE
        self.is_bone = [n.attrib_type == bone for n in nodes]
        self.orders = [int(n.rotation_order) for n in nodes]
        self.post = []
        for n in nodes:
            props = n.props
            prop = props.find_prop("PostRotation")
            value = prop.value_vec4 if prop is not None else (0.0, 0.0, 0.0, 0.0)
            self.post.append(np.array(value[:3], dtype=np.float64))
        self.children: list[list[int]] = [[] for _ in nodes]
        for i, p in enumerate(self.parents):
            if p >= 0:
                self.children[p].append(i)
        # nodes with a joint below them: a group (null) between two joints is part of the
        # skeleton, or the joints below it would be lost
        self.holds_bone = list(self.is_bone)
        for i in range(len(nodes)):
            if self.is_bone[i]:
                j = self.parents[i]
                while j >= 0 and not self.holds_bone[j]:
                    self.holds_bone[j] = True
                    j = self.parents[j]
        self.roots = [i for i in range(len(nodes))
                      if self.is_bone[i] and not self._bone_above(i)]

    def _bone_above(self, node: int) -> bool:
        j = self.parents[node]
        while j >= 0:
            if self.is_bone[j]:
                return True
            j = self.parents[j]
        return False

    def subtree(self, root: int) -> list[int]:
        """The joints under ``root`` (itself included), parents first: joints, and the other
        nodes (groups) that have joints below them."""
        order, stack = [], [root]
        while stack:
            i = stack.pop()
            order.append(i)
            stack.extend(c for c in reversed(self.children[i]) if self.holds_bone[c])
        return order


def _choose_root(graph: _Scene, root: str | None, path: str) -> int:
    if not graph.roots:
        raise ClipFormatError("no skeleton: the file has no joints (FBX skeleton/LimbNode "
                              "nodes)", path)
    if root is None:
        return graph.roots[0]
    matches = [i for i, n in enumerate(graph.names) if n == root]
    joints = [i for i in matches if graph.is_bone[i]]
    if len(joints) > 1:
        raise ClipFormatError(f"{len(joints)} joints are named {root!r}; name a node above one "
                              "of them with --root", path)
    if joints:
        return joints[0]
    for i in matches:  # a node above a skeleton (an armature, a reference null)
        below = [r for r in graph.roots if _is_below(graph, r, i)]
        if below:
            return below[0]
    names = ", ".join(graph.names[r] for r in graph.roots)
    raise ClipFormatError(f"no root joint {root!r}; the skeleton roots are {names}", path)


def _is_below(graph: _Scene, node: int, ancestor: int) -> bool:
    while node >= 0:
        if node == ancestor:
            return True
        node = graph.parents[node]
    return False


def _choose_take(stacks: list[Any], take: str | None, path: str) -> tuple[Any, str]:
    names = [s.name for s in stacks]
    if not stacks:
        raise ClipFormatError("no animation: the file has no take (animation stack)", path)
    if take is not None:
        if take not in names:
            raise ClipFormatError(f"no take {take!r}; the takes are "
                                  f"{', '.join(repr(n) for n in names)}", path)
        chosen = stacks[names.index(take)]
        return chosen, chosen.name
    # the file's active take by the name the document gives (ufbx 0.0.5 does not read it: its
    # default animation is the first take); the first take when it names none, as Blender's
    # files do (an empty name)
    active = _active_take(path)
    chosen = stacks[names.index(active)] if active in names else stacks[0]
    return chosen, chosen.name


def _active_take(path: str) -> str | None:
    """The document's ``ActiveAnimStackName`` (None where the file has none).

    In a binary file the property is a node ``P`` whose values are strings, each ``S``, its
    length (uint32, little-endian) and its bytes: the name, ``KString``, two empty strings and
    the value; in an ASCII file the same values stand quoted after ``P:``.
    """
    with open(path, "rb") as handle:
        if os.fstat(handle.fileno()).st_size == 0:
            return None
        with mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as data:
            at = data.find(_ACTIVE_TAKE)
            if at < 0:
                return None
            if data[:len(_BINARY_MAGIC)] != _BINARY_MAGIC:
                found = _ASCII_ACTIVE_TAKE.match(data, at - 1)
                return found.group(1).decode("utf-8", "replace") if found else None
            header = b"S" + struct.pack("<I", len(_ACTIVE_TAKE))
            if data[at - len(header):at] != header:
                return None
            cursor, value = at + len(_ACTIVE_TAKE), b""
            for _ in range(4):  # KString, "", "", the value
                if data[cursor:cursor + 1] != b"S":
                    return None
                (length,) = struct.unpack("<I", data[cursor + 1:cursor + 5])
                value = data[cursor + 5:cursor + 5 + length]
                cursor += 5 + length
            return value.decode("utf-8", "replace")


def read_clip(path: _PathLike, first_frame: int | None = None, take: str | None = None,
              root: str | None = None) -> Clip:
    """Read one skeleton's animation for one take of an FBX file.

    Parameters
    ----------
    path : str or path-like
    first_frame : int, optional
        Host frame number given to the take's first frame (default the take's own start
        frame, its start time times the scene rate).
    take : str, optional
        Name of the take (animation stack); default the file's active take.
    root : str, optional
        Name of the skeleton's root joint (or of a node above it, such as an armature);
        default the first skeleton root in the file. A joint lower in a skeleton reads the part
        below it.

    Returns
    -------
    Clip
        Named after the file stem; ``units`` and ``up_axis`` from the file's settings; positions
        in the file's units, rotations in degrees (unwrapped; the file's values in
        ``raw_channels``).

    Raises
    ------
    ClipFormatError
        Not an FBX file, a truncated one, no skeleton, no animation, an unknown take or root, or
        transforms a clip cannot represent.
    """
    name = os.fspath(path)
    graph, selected, samples, take_name, settings = _extract_isolated(name, take, root)
    rate = settings["rate"]
    clip = Clip(**_build_clip(graph, selected, samples, name, take_name),
                fps=fps_from_frame_time(1.0 / rate), frame_time=1.0 / rate,
                first_frame=settings["begin"] if first_frame is None else first_frame,
                name=Path(name).stem, units=settings["units"],
                up_axis=settings["up"])
    _verify(clip, samples["world"][:-1], name)
    return clip.unwrapped()


def _extract_isolated(name: str, take: str | None, root: str | None) -> tuple[Any, ...]:
    """Run :func:`_extract_file` in a child process and return its result.

    Why a child: the Python binding of ufbx 0.0.5 hands out its element objects (nodes, takes,
    layers) as borrowed references, so freeing them, or the scene, corrupts memory and crashes
    the interpreter. The child reads the file with garbage collection off and exits without
    freeing anything (``os._exit``); the operating system reclaims the memory. A fork costs
    milliseconds; without ``fork`` (Windows) a fresh interpreter runs this module instead.
    """
    if hasattr(os, "fork"):
        _ufbx(name)  # imported once here (only the module: no scene), not in every child
        read_end, write_end = os.pipe()
        pid = os.fork()
        if pid == 0:  # pragma: no cover - runs in the child, reported through the pipe
            try:
                os.close(read_end)
                with os.fdopen(write_end, "wb") as pipe:
                    pipe.write(_child_result(name, take, root))
            finally:
                os._exit(0)
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            data = pipe.read()
        status = os.waitstatus_to_exitcode(os.waitpid(pid, 0)[1])
    else:  # Windows
        done = subprocess.run([sys.executable, "-m", "sp_core.io.fbx", name, repr(take),
                               repr(root)], capture_output=True)
        data, status = done.stdout, done.returncode
    if not data:
        how = f"signal {-status}" if status < 0 else f"exit status {status}"
        raise ClipFormatError(f"ufbx crashed while reading this file ({how}); the file may be "
                              "damaged or use something ufbx cannot read", name)
    kind, payload = pickle.loads(data)
    if kind == "error":
        raise ClipFormatError(*payload)
    return payload


def _child_result(name: str, take: str | None, root: str | None) -> bytes:
    """Pickled ``("ok", extracted)`` or ``("error", (message, path))`` for the parent."""
    gc.disable()  # collecting ufbx objects is what crashes
    try:
        result: tuple[str, Any] = ("ok", _extract_file(name, take, root))
    except ClipFormatError as exc:
        result = ("error", (exc.reason, exc.path))
    except Exception as exc:  # noqa: BLE001 - any failure becomes the parent's one-line error
        result = ("error", (f"ufbx cannot read this file: {type(exc).__name__}: {exc}", name))
    return pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)


def _extract_file(name: str, take: str | None, root: str | None) -> tuple[Any, ...]:
    ufbx = _ufbx(name)
    scene = _load(ufbx, name)
    return _extract(scene, ufbx, name, take, root)


def _extract(scene: Any, ufbx: Any, name: str, take: str | None, root: str | None
             ) -> tuple[_Scene, list[int], dict[str, np.ndarray], str, dict[str, Any]]:
    """Everything the clip needs from a loaded scene, as plain Python and numpy data."""
    graph = _Scene(scene, ufbx)
    start = _choose_root(graph, root, name)
    stacks = _elements(scene.anim_stacks)
    stack, take_name = _choose_take(stacks, take, name)
    anim = stack.anim
    scene_settings = scene.settings
    rate = _frame_rate(scene_settings, name)
    settings: dict[str, Any] = {"rate": rate,
                                "units": unit_name(float(scene_settings.unit_meters)),
                                "up": _AXES.get(int(scene_settings.axes.up), "y")}
    del scene_settings
    time_begin, time_end = _time_span(stack)
    begin = int(round(time_begin * rate))
    end = int(round(time_end * rate))
    if end < begin:
        raise ClipFormatError(f"take {take_name!r} has an empty time range "
                              f"({time_begin:g} s to {time_end:g} s)", name)
    settings["begin"] = begin
    selected = graph.subtree(start)
    samples = _sample(scene, anim, selected, graph.parents[start],
                      np.arange(begin, end + 1) / rate)
    _check_finite(graph, selected, samples, take_name, begin, name)
    return graph, selected, samples, take_name, settings


def _frame_rate(scene_settings: Any, path: str) -> float:
    """The scene's frame rate (frames per second): exact for the NTSC time modes and 119.88
    (:data:`_EXACT_RATES`), ufbx's for the others; an unknown time mode is refused rather than
    read at ufbx's fallback of 24 fps."""
    mode = int(scene_settings.props.find_int("TimeMode", 0))
    if mode in _EXACT_RATES:
        return _EXACT_RATES[mode]
    if not 0 <= mode <= _LAST_TIME_MODE:
        raise ClipFormatError(f"the scene's time mode (TimeMode {mode}) is not one the FBX SDK "
                              f"defines (0 to {_LAST_TIME_MODE}), so its frame rate is unknown",
                              path)
    rate = float(scene_settings.frames_per_second)
    if not (np.isfinite(rate) and rate > 0):
        raise ClipFormatError(f"the scene frame rate is {rate!r}; expected a positive number",
                              path)
    return rate


def _time_span(stack: Any) -> tuple[float, float]:
    """The take's first and last time (seconds): its own span (``LocalStart``/``LocalStop``,
    else ``ReferenceStart``/``ReferenceStop``, as ufbx reads them) or, for a take that gives
    neither (ufbx then says 0 to 0), the span of its keys."""
    props = stack.props
    if any(props.find_prop(p) is not None for p in _SPAN_PROPERTIES):
        return float(stack.time_begin), float(stack.time_end)
    first, last = np.inf, -np.inf
    for layer in _elements(stack.layers):
        for value in _elements(layer.anim_values):
            for curve in _elements(value.curves):
                if curve is not None and len(curve.keyframes):
                    first = min(first, float(curve.min_time))
                    last = max(last, float(curve.max_time))
    if first > last:  # no keys at all: ufbx's 0 to 0 (one frame of the stored pose)
        return float(stack.time_begin), float(stack.time_end)
    return first, last


def _check_finite(graph: _Scene, selected: list[int], samples: dict[str, np.ndarray],
                  take: str, begin: int, path: str) -> None:
    """Refuse a NaN or infinite value in the joints' transforms (a key, or a stored value): the
    first joint down the hierarchy, at its first such frame (the ones below it follow it)."""
    local = np.concatenate([samples[key] for key in ("translation", "rotation", "scale",
                                                     "euler")], axis=2)
    bad = ~np.isfinite(local).all(axis=2)  # (rows, nodes); the last row is the stored state
    if not bad.any():
        return
    j = int(np.flatnonzero(bad.any(axis=0))[0])
    rows = np.flatnonzero(bad[:, j])
    joint = graph.names[selected[j]]
    if rows[0] == len(bad) - 1:
        where = "in its stored (unanimated) transform"
    else:
        more = int(np.count_nonzero(rows < len(bad) - 1)) - 1
        where = (f"at frame {begin + int(rows[0])} of take {take!r}"
                 + (f" (and {more} more frame{'s' * (more > 1)})" if more else ""))
    raise ClipFormatError(f"joint {joint!r} has a value that is not a number (NaN or infinity) "
                          f"{where}; salient-poses reads finite values only", path)


def _sample(scene: Any, anim: Any, selected: list[int], above: int,
            times: np.ndarray) -> dict[str, np.ndarray]:
    """Evaluate the scene at every time and keep what the clip needs, as arrays.

    Returns
    -------
    dict of arrays with one row per time plus a last row for the file's stored (unanimated)
    state: ``translation`` (n_frames + 1, n_nodes, 3), ``rotation`` (..., 4) quaternions x, y,
    z, w, ``scale`` (..., 3), ``euler`` (..., 3) degrees, ``world`` (..., 3) world positions and
    ``above`` (n_frames + 1, 3, 4) the world transform of the node above the root (identity when
    there is none).
    """
    rows: list[list[float]] = []
    above_rows: list[np.ndarray] = []
    for time in times:
        evaluated = scene.evaluate(anim, float(time))
        _keep_state(evaluated, selected, above, rows, above_rows)
        del evaluated
    _keep_state(scene, selected, above, rows, above_rows)
    values = np.array(rows, dtype=np.float64).reshape(len(rows), len(selected), 16)
    out = {key: values[:, :, start:stop] for key, start, stop in
           (("translation", 0, 3), ("rotation", 3, 7), ("scale", 7, 10), ("euler", 10, 13),
            ("world", 13, 16))}
    out["above"] = np.stack(above_rows) if above_rows else np.tile(np.eye(3, 4),
                                                                   (len(rows), 1, 1))
    return out


def _keep_state(scene: Any, selected: list[int], above: int, rows: list[list[float]],
                above_rows: list[np.ndarray]) -> None:
    """Append one row of 16 numbers per selected node: translation, rotation quaternion, scale,
    Euler angles, world position (plain Python floats: far cheaper than numpy writes)."""
    nodes = scene.nodes
    row: list[float] = []
    for i in selected:
        node = _elements([nodes[i]])[0]
        translation, rotation, scale = node.local_transform
        row += (*translation, *rotation, *scale, *node.euler_rotation, *node.node_to_world.c3)
    rows.append(row)
    if above >= 0:
        above_rows.append(_matrix(_elements([nodes[above]])[0].node_to_world))


def _uniform_scale(scale: np.ndarray, what: str, path: str) -> float:
    """One scale factor for ``scale`` (n_frames, 3), refusing non-uniform or animated scale."""
    value = float(np.mean(scale))
    if not (np.isfinite(value) and value > 0) or \
            np.ptp(scale) > _SCALE_TOLERANCE * abs(value):
        raise ClipFormatError(f"{what} has non-uniform or animated scale (from "
                              f"{scale.min():.6g} to {scale.max():.6g}); salient-poses reads "
                              "skeletons whose joints keep one uniform scale", path)
    return value


def _build_clip(graph: _Scene, selected: list[int], samples: dict[str, np.ndarray], path: str,
                take: str) -> dict[str, Any]:
    """Skeleton, orients, channels and rest channels (the Clip's arguments) from the sampled
    transforms; the last sample row is the file's stored (rest) state."""
    k = len(selected)
    position = {i: j for j, i in enumerate(selected)}
    root_name = graph.names[selected[0]]
    take_rows = slice(0, samples["euler"].shape[0] - 1)
    above_linear = samples["above"][:, :, :3]
    above_scale = np.linalg.norm(above_linear, axis=1)  # (rows, 3) column lengths
    s_above = _uniform_scale(above_scale[take_rows], f"the node above root {root_name!r}", path)
    above_rotation = above_linear[0] / s_above
    if np.ptp(above_linear[take_rows], axis=0).max() > 1e-9 * s_above:
        raise ClipFormatError(f"the nodes above root {root_name!r} move during take {take!r}; "
                              "salient-poses needs them still (read a root that holds the "
                              "motion)", path)
    size = float(np.ptp(samples["world"][take_rows].reshape(-1, 3), axis=0).max()) or 1.0

    node_names = [graph.names[i] for i in selected]
    parents = [-1] + [position[graph.parents[i]] for i in selected[1:]]
    offsets = np.zeros((k, 3))
    orients = np.empty((k, 3, 3))
    end_sites = [False] * k
    names: list[str] = []
    columns: list[np.ndarray] = []
    accumulated = np.empty(k)  # uniform world scale of each node
    post_inverse = np.empty((k, 3, 3))
    for j, i in enumerate(selected):
        if graph.orders[i] >= len(_ORDERS):
            raise ClipFormatError(f"joint {graph.names[i]!r} uses a spheric rotation order; "
                                  "salient-poses reads Euler orders (XYZ ... ZYX)", path)
        order = _ORDERS[graph.orders[i]]
        euler = samples["euler"][:, j]
        post = _euler_matrix("XYZ", graph.post[i][None])[0]
        post_inverse[j] = post.T
        # Q = Pre · R · Post⁻¹ with Pre constant: Pre from the first frame
        first = Rotation.from_quat(samples["rotation"][0, j]).as_matrix()
        pre = first @ post @ _euler_matrix(order, euler[:1])[0].T
        has_children = any(graph.parents[c] == i for c in selected)
        own_scale = 1.0
        if has_children:
            own_scale = _uniform_scale(samples["scale"][take_rows, j],
                                       f"joint {graph.names[i]!r}", path)
        if j == 0:
            orients[j] = above_rotation @ pre
            accumulated[j] = s_above * own_scale
            moves = True
            values = samples["world"][:, 0]
        else:
            p = position[graph.parents[i]]
            orients[j] = post_inverse[p] @ pre
            accumulated[j] = accumulated[p] * own_scale
            values = accumulated[p] * samples["translation"][:, j] @ post_inverse[p].T
            moves = bool(np.ptp(values[take_rows], axis=0).max() > _MOTION_TOLERANCE * size)
            offsets[j] = values[0]
        turns = bool(np.ptp(euler[take_rows], axis=0).max() > _TURN_TOLERANCE)
        if not has_children and not moves and not turns:
            end_sites[j] = True
            orients[j] = np.eye(3)
            continue
        if moves:
            names += [f"{graph.names[i]}.{a}" for a in POSITION_ATTRIBUTES]
            columns += list(values.T)
        # Clip channels list intrinsic rotations: FBX "XYZ" (R = Rz·Ry·Rx) is listed Z, Y, X.
        for axis in reversed(order):
            names.append(f"{graph.names[i]}.{ROTATION_ATTRIBUTES['XYZ'.index(axis)]}")
            columns.append(euler[:, "XYZ".index(axis)])
    if len(set(node_names)) != len(node_names):
        duplicate = next(n for n in node_names if node_names.count(n) > 1)
        raise ClipFormatError(f"joint name {duplicate!r} is used twice in the skeleton under "
                              f"{root_name!r}; joint names must be unique", path)
    rows = samples["euler"].shape[0]
    values = np.stack(columns, axis=1) if columns else np.zeros((rows, 0))
    return dict(node_names=node_names, parents=parents, offsets=offsets, end_sites=end_sites,
                channel_names=names, channels=values[take_rows], rest_channels=values[-1],
                orients=orients)


def _verify(clip: Clip, world: np.ndarray, path: str) -> None:
    """Compare the clip's world positions with ufbx's at the first, middle and last frame."""
    rows = sorted({0, clip.n_frames // 2, clip.n_frames - 1})
    ours = clip.forward_kinematics(clip.channels[rows])
    size = float(np.ptp(world.reshape(-1, 3), axis=0).max()) or 1.0
    gap = np.linalg.norm(ours - world[rows], axis=2)
    if gap.max() > 1e-5 * size:  # float32 files: scales of 0.99999994 read as 1
        frame, node = np.unravel_index(np.argmax(gap), gap.shape)
        raise ClipFormatError(
            f"joint {clip.node_names[node]!r} is {gap.max():.4g} {clip.units or 'units'} from "
            f"where the file puts it at frame {clip.first_frame + rows[frame]}: its transform "
            "uses features a clip cannot hold (scale inheritance modes, pivots that move)", path)


if __name__ == "__main__":  # pragma: no cover - the child process where fork is missing
    import ast

    # through the package module, so the parent unpickles sp_core.io.fbx classes, not __main__'s
    from sp_core.io import fbx as _module

    sys.stdout.buffer.write(_module._child_result(sys.argv[1], ast.literal_eval(sys.argv[2]),
                                                  ast.literal_eval(sys.argv[3])))
    sys.stdout.flush()
    os._exit(0)
