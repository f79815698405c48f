"""Biovision Hierarchy (BVH) files: read into a :class:`~sp_core.clip.Clip` and write back.

The reader accepts what real files contain: 3 or 6 (or any subset of the six) channels on any
joint, any rotation order, several ROOTs, End Sites, tabs, CRLF line ends, trailing spaces,
scientific notation and frame times like ``.0083333`` (reported as 120 fps, the exact frame time is
kept). The motion block is parsed by numpy in one call; only when that fails is it walked line by
line, to say exactly where and what is wrong. Every problem raises
:class:`~sp_core.errors.ClipFormatError` naming the file and line.
"""

from __future__ import annotations

import io
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
from scipy.spatial.transform import Rotation

from sp_core.clip import (
    LARGEST_VALUE,
    MAX_FPS,
    MIN_FPS,
    POSITION_ATTRIBUTES,
    ROTATION_ATTRIBUTES,
    Clip,
)
from sp_core.errors import ClipError, ClipFormatError
from sp_core.euler import euler_matrices, unwrap_euler
from sp_core.io.atomic import atomic_open

_ATTRIBUTES = {a.lower(): a for a in POSITION_ATTRIBUTES + ROTATION_ATTRIBUTES}
_FRAMES = re.compile(r"^\s*Frames\s*:\s*(\S*)\s*(.*)$", re.IGNORECASE)
_FRAME_TIME = re.compile(r"^\s*Frame\s+Time\s*:\s*(\S*)\s*(.*)$", re.IGNORECASE)
# Common video and mocap rates; a frame time within 0.05 % of one of them reports that rate.
_NOMINAL_RATES = (24000 / 1001, 30000 / 1001, 60000 / 1001, 120000 / 1001)
_PathLike = str | os.PathLike[str]


@dataclass
class _Node:
    name: str
    parent: int
    offset: tuple[float, float, float]
    end_site: bool
    channels: list[str] = field(default_factory=list)
    line: int = 0


class _Tokens:
    """Whitespace tokens of the HIERARCHY block with their 1-based line numbers."""

    def __init__(self, lines: list[str], path: str) -> None:
        self.path = path
        self.items: list[tuple[str, int]] = []
        self.motion_line = None
        for number, text in enumerate(lines, start=1):
            words = text.split()
            if words and words[0].upper() == "MOTION":
                self.motion_line = number
                break
            self.items.extend((w, number) for w in words)
        self.pos = 0
        self.last_line = self.motion_line or max(1, len(lines))

    def error(self, message: str, line: int | None = None) -> ClipFormatError:
        return ClipFormatError(message, self.path, line if line is not None else self.line())

    def line(self) -> int:
        if self.pos < len(self.items):
            return self.items[self.pos][1]
        return self.last_line

    def peek(self) -> str | None:
        return self.items[self.pos][0] if self.pos < len(self.items) else None

    def describe_next(self) -> str:
        token = self.peek()
        if token is not None:
            return _quoted(token)
        return "'MOTION'" if self.motion_line else "the end of the file"

    def take(self, expected: str) -> str:
        token = self.peek()
        if token is None or token.upper() != expected.upper():
            raise self.error(f"expected {expected!r}, found {self.describe_next()}")
        self.pos += 1
        return token

    def take_rest_of_line(self, what: str) -> str:
        """Words up to ``{`` or the end of the current line (joint names may contain spaces)."""
        if self.peek() is None:
            raise self.error(f"expected {what}, found {self.describe_next()}")
        line = self.items[self.pos][1]
        words = []
        while self.pos < len(self.items) and self.items[self.pos][1] == line \
                and self.items[self.pos][0] != "{":
            words.append(self.items[self.pos][0])
            self.pos += 1
        if not words:
            raise self.error(f"expected {what}, found {self.describe_next()}")
        return " ".join(words)

    def take_number(self, what: str) -> float:
        token = self.peek()
        if token is None:
            raise self.error(f"expected {what}, found {self.describe_next()}")
        try:
            value = float(token)
        except ValueError:
            raise self.error(f"expected {what}, found {_quoted(token)}") from None
        if not np.isfinite(value):
            raise self.error(f"{what} must be finite, found {_quoted(token)}")
        if abs(value) > LARGEST_VALUE:
            raise self.error(f"{what} must be within ±{LARGEST_VALUE:g}, found {_quoted(token)}")
        self.pos += 1
        return value


def _parse_hierarchy(tokens: _Tokens) -> list[_Node]:
    tokens.take("HIERARCHY")
    nodes: list[_Node] = []
    if tokens.peek() is None or tokens.peek().upper() != "ROOT":  # type: ignore[union-attr]
        raise tokens.error(f"expected 'ROOT', found {tokens.describe_next()}")
    while tokens.peek() is not None and tokens.peek().upper() == "ROOT":  # type: ignore[union-attr]
        _parse_joint(tokens, nodes, parent=-1, keyword="ROOT")
    if tokens.peek() is not None:
        raise tokens.error(f"expected 'ROOT' or 'MOTION', found {tokens.describe_next()}")
    if tokens.motion_line is None:
        raise tokens.error("expected 'MOTION' after the hierarchy, found the end of the file")
    return nodes


@dataclass
class _Open:
    """A joint whose braces are still open while its children are parsed."""

    index: int
    keyword: str
    opened: int
    seen_offset: bool = False
    seen_channels: bool = False


def _parse_joint(tokens: _Tokens, nodes: list[_Node], parent: int, keyword: str) -> None:
    """Parse one ROOT/JOINT block and everything inside it.

    An explicit stack instead of recursion: a chain of thousands of joints is valid BVH.
    """
    names = {n.name for n in nodes}
    stack: list[_Open] = []

    def open_joint(parent: int, keyword: str) -> None:
        opened = tokens.line()
        tokens.take(keyword)
        name = tokens.take_rest_of_line(f"a name after {keyword}")
        if name in names:
            taken = next(n for n in nodes if n.name == name)
            if not taken.end_site:
                raise tokens.error(f"joint name {name!r} is used twice; names must be unique",
                                   opened)
            # an End Site's name is ours (its parent's and "_end"): it gives way to the joint
            taken.name = _free_name(name, names)
            names.add(taken.name)
        tokens.take("{")
        names.add(name)
        stack.append(_Open(len(nodes), keyword, opened))
        nodes.append(_Node(name, parent, (0.0, 0.0, 0.0), False, line=opened))

    open_joint(parent, keyword)
    while stack:
        top = stack[-1]
        node = nodes[top.index]
        name = node.name
        word = tokens.peek()
        upper = word.upper() if word is not None else None
        if upper == "OFFSET":
            if top.seen_offset:
                raise tokens.error(f"second OFFSET in joint {name!r}")
            tokens.take("OFFSET")
            node.offset = tuple(tokens.take_number("an OFFSET value (3 numbers)")  # type: ignore[assignment]
                                for _ in range(3))
            top.seen_offset = True
        elif upper == "CHANNELS":
            if top.seen_channels:
                raise tokens.error(f"second CHANNELS in joint {name!r}")
            _parse_channels(tokens, node)
            top.seen_channels = True
        elif upper in ("JOINT", "END"):
            if not top.seen_offset:
                raise tokens.error(f"joint {name!r} needs an OFFSET before its children")
            if upper == "JOINT":
                open_joint(top.index, "JOINT")
            else:
                _parse_end_site(tokens, nodes, parent=top.index)
                names.add(nodes[-1].name)
        elif word == "}":
            if not top.seen_offset:
                raise tokens.error(f"joint {name!r} has no OFFSET")
            tokens.take("}")
            stack.pop()
        elif word is None:
            raise tokens.error(f"expected '}}' closing {top.keyword} {name!r} (opened on line "
                               f"{top.opened}), found {tokens.describe_next()}")
        else:
            raise tokens.error(f"expected OFFSET, CHANNELS, JOINT, End Site or '}}' inside "
                               f"{top.keyword} {name!r}, found {word!r}")


def _parse_channels(tokens: _Tokens, node: _Node) -> None:
    line = tokens.line()
    tokens.take("CHANNELS")
    count = tokens.take_number("the number of channels")
    if count != int(count) or not 0 <= count <= 6:
        raise tokens.error(f"channel count must be an integer from 0 to 6, found {count:g}",
                           line)
    for _ in range(int(count)):
        token = tokens.peek()
        if token is None or token.lower() not in _ATTRIBUTES:
            raise tokens.error(
                f"expected a channel name (one of {', '.join(_ATTRIBUTES.values())}) — "
                f"CHANNELS {int(count)} on line {line} lists {int(count)} — found "
                f"{tokens.describe_next()}")
        attribute = _ATTRIBUTES[token.lower()]
        if attribute in node.channels:
            raise tokens.error(f"channel {attribute} listed twice for joint {node.name!r}")
        node.channels.append(attribute)
        tokens.pos += 1


def _parse_end_site(tokens: _Tokens, nodes: list[_Node], parent: int) -> None:
    opened = tokens.line()
    tokens.take("End")
    tokens.take("Site")
    # A few exporters name their End Sites; the name is ignored, ours is derived from the parent.
    while tokens.peek() not in (None, "{") and tokens.items[tokens.pos][1] == opened:
        tokens.pos += 1
    tokens.take("{")
    tokens.take("OFFSET")
    offset = tuple(tokens.take_number("an OFFSET value (3 numbers)") for _ in range(3))
    if tokens.peek() != "}":
        raise tokens.error(f"expected '}}' closing the End Site opened on line {opened}, found "
                           f"{tokens.describe_next()}")
    tokens.take("}")
    name = _free_name(f"{nodes[parent].name}_end", {n.name for n in nodes})
    nodes.append(_Node(name, parent, offset, True, line=opened))  # type: ignore[arg-type]


def _free_name(base: str, taken: set[str]) -> str:
    """``base``, or ``base2``, ``base3``…: the first not in ``taken``."""
    name, k = base, 1
    while name in taken:
        k += 1
        name = f"{base}{k}"
    return name


def read_clip(path: _PathLike, first_frame: int | None = None, take: str | None = None,
              root: str | None = None) -> Clip:
    """The reader of :mod:`sp_core.io.readers`: :func:`read_bvh`, optionally one hierarchy.

    ``root`` keeps the hierarchy under that root joint (a file may hold several); BVH has no
    takes, so ``take`` is refused rather than ignored.
    """
    if take is not None:
        raise ClipFormatError("a BVH file has no takes; drop --take", str(path))
    clip = read_bvh(path, first_frame=0 if first_frame is None else first_frame)
    if root is None:
        return clip
    if root not in clip.root_names:
        raise ClipFormatError(f"no root joint {root!r}; the roots are "
                              f"{', '.join(clip.root_names)}", str(path))
    start = clip.node_index(root)
    inside = {start}
    for i in range(start + 1, clip.n_nodes):
        if int(clip.parents[i]) in inside:
            inside.add(i)
    return clip.sub_nodes([clip.node_names[i] for i in sorted(inside)])


def fps_from_frame_time(frame_time: float) -> float:
    """Frame rate for a frame time, snapped to the nominal rate the file was rounded from.

    Parameters
    ----------
    frame_time : float, seconds per frame

    Returns
    -------
    float, frames per second: an integer rate (120 for 0.0083333) or an NTSC rate
    (29.97... for 0.0333667) when the frame time is within 0.05 % of it, else ``1 / frame_time``.
    """
    rate = 1.0 / frame_time
    for nominal in (float(round(rate)), *_NOMINAL_RATES):
        if nominal > 0 and abs(rate - nominal) <= 5e-4 * nominal:
            return nominal
    return rate


#: Characters of a file's text an error message quotes (a line of 20,000 numbers was quoted
#: whole: one message of 80,000 characters).
QUOTED = 60


def _quoted(text: str) -> str:
    """``text`` (stripped) quoted for an error message, cut to :data:`QUOTED` characters."""
    text = text.strip()
    if len(text) <= QUOTED:
        return repr(text)
    return f"{text[:QUOTED]!r}… ({len(text):,} characters)"


def _header_value(lines: list[str], index: int, pattern: re.Pattern[str], label: str,
                  path: str) -> str:
    if index >= len(lines):
        raise ClipFormatError(f"expected '{label}', found the end of the file", path, index + 1)
    match = pattern.match(lines[index])
    if not match or not match.group(1) or match.group(2):
        raise ClipFormatError(f"expected '{label} <number>', found {_quoted(lines[index])}",
                              path, index + 1)
    return match.group(1)


def _diagnose_motion(lines: list[str], first: int, n_frames: int, channel_names: list[str],
                     path: str) -> ClipFormatError:
    """Walk the motion rows one by one and describe the first problem (slow path, errors only)."""
    n_channels = len(channel_names)
    row = 0
    last_line = first
    for number in range(first, len(lines)):
        words = lines[number].split()
        if not words:
            continue
        last_line = number + 1
        if row == n_frames:
            return ClipFormatError(f"more motion data than the header's 'Frames: {n_frames}': "
                                   f"this line would be frame {row + 1}", path, number + 1)
        if len(words) != n_channels:
            return ClipFormatError(f"expected {n_channels} values (one per channel declared in "
                                   f"the hierarchy), found {len(words)}", path, number + 1)
        for column, word in enumerate(words):
            try:
                value = float(word)
            except ValueError:
                value = None
            if value is None or not np.isfinite(value) or abs(value) > LARGEST_VALUE:
                why = "is not a number" if value is None else "is not finite (NaN or infinity)" \
                    if not np.isfinite(value) else \
                    f"is beyond ±{LARGEST_VALUE:g}, which no motion comes near"
                return ClipFormatError(f"value {_quoted(word)} for channel "
                                       f"{channel_names[column]} {why}", path, number + 1)
        row += 1
    return ClipFormatError(f"the file ends after {row} frames of motion data but the header says "
                           f"'Frames: {n_frames}' (truncated file?)", path, last_line)


def _read_text(path: _PathLike) -> str:
    try:
        data = Path(path).read_bytes()
    except OSError as exc:
        raise ClipFormatError(f"cannot read the file: {exc.strerror or exc}",
                              os.fspath(path)) from None
    for encoding in ("utf-8-sig", "latin-1"):
        try:
            return data.decode(encoding)
        except UnicodeDecodeError:
            continue
    raise AssertionError("latin-1 decodes any bytes")  # pragma: no cover


def read_bvh(path: _PathLike, first_frame: int = 0, unwrap: bool = True) -> Clip:
    """Read a BVH file.

    Parameters
    ----------
    path : str or path-like
    first_frame : int, optional
        Host frame number of the first motion row (BVH has none of its own; default 0).
    unwrap : bool, optional
        Make rotation curves continuous (the poses do not change); the file's values stay
        available as ``clip.raw_channels``.

    Returns
    -------
    Clip
        Named after the file stem.

    Raises
    ------
    ClipFormatError
        For any malformed content, naming the file, the line and what was expected.
    """
    name = os.fspath(path)
    text = _read_text(path)
    return parse_bvh(text, name=name, first_frame=first_frame, unwrap=unwrap)


def parse_bvh(text: str, name: str = "<string>", first_frame: int = 0,
              unwrap: bool = True) -> Clip:
    """Parse BVH text; see :func:`read_bvh`. ``name`` is used in messages and for the clip name."""
    lines = text.splitlines()
    tokens = _Tokens(lines, name)
    nodes = _parse_hierarchy(tokens)
    channel_names = [f"{n.name}.{a}" for n in nodes for a in n.channels]

    motion = tokens.motion_line  # 1-based line of MOTION == 0-based index of the next line
    assert motion is not None
    if lines[motion - 1].split()[1:]:
        raise ClipFormatError(f"unexpected text after MOTION: {_quoted(lines[motion - 1])}",
                              name, motion)
    frames_text = _header_value(lines, motion, _FRAMES, "Frames:", name)
    try:
        n_frames = int(frames_text)
    except ValueError:
        n_frames = -1
    if n_frames < 0:
        raise ClipFormatError(f"'Frames:' must be a whole number of frames, found {frames_text!r}",
                              name, motion + 1)
    time_text = _header_value(lines, motion + 1, _FRAME_TIME, "Frame Time:", name)
    try:
        frame_time = float(time_text)
    except ValueError:
        frame_time = float("nan")
    if not (np.isfinite(frame_time) and frame_time > 0):
        raise ClipFormatError(f"'Frame Time:' must be a positive number of seconds, found "
                              f"{time_text!r}", name, motion + 2)
    if not 1.0 / MAX_FPS <= frame_time <= 1.0 / MIN_FPS:
        raise ClipFormatError(f"'Frame Time:' {time_text} s is outside {1.0 / MAX_FPS:g} to "
                              f"{1.0 / MIN_FPS:g} s (a million frames a second to one an "
                              "hour)", name, motion + 2)

    data_start = motion + 2  # 0-based index of the first motion row
    if not channel_names:
        values = np.zeros((n_frames, 0))
    else:
        values = _parse_motion(lines, data_start, n_frames, channel_names, name)

    clip = Clip(
        node_names=[n.name for n in nodes], parents=[n.parent for n in nodes],
        offsets=np.array([n.offset for n in nodes], dtype=np.float64).reshape(-1, 3),
        end_sites=[n.end_site for n in nodes], channel_names=channel_names, channels=values,
        fps=fps_from_frame_time(frame_time), frame_time=frame_time, first_frame=first_frame,
        name=Path(name).stem if name != "<string>" else name)
    return clip.unwrapped() if unwrap else clip


def _parse_motion(lines: list[str], start: int, n_frames: int, channel_names: list[str],
                  path: str) -> np.ndarray:
    """Motion rows as a (n_frames, n_channels) array, with numpy's C parser on the happy path."""
    n_channels = len(channel_names)
    body = lines[start:]
    if not any(line.strip() for line in body):
        values = np.zeros((0, n_channels))
    else:
        try:
            values = np.loadtxt(body, dtype=np.float64, ndmin=2, comments=None)
        except ValueError:
            raise _diagnose_motion(lines, start, n_frames, channel_names, path) from None
    if values.shape != (n_frames, n_channels) or not np.all(np.isfinite(values)) \
            or np.any(np.abs(values) > LARGEST_VALUE):
        raise _diagnose_motion(lines, start, n_frames, channel_names, path)
    return values


def _write_rows(handle: io.TextIOBase, values: np.ndarray, precision: int) -> None:
    if values.shape[1] == 0:
        handle.write("\n" * values.shape[0])
        return
    row = " ".join([f"%.{precision}g"] * values.shape[1]) + "\n"
    # Formatting many rows per call keeps this fast without a Python loop per value.
    block = 512
    for start in range(0, values.shape[0], block):
        chunk = values[start:start + block]
        handle.write((row * len(chunk)) % tuple(chunk.ravel()))


def _dfs_order(clip: Clip) -> list[int]:
    children: list[list[int]] = [[] for _ in range(clip.n_nodes)]
    roots = []
    for i, p in enumerate(clip.parents):
        (children[p] if p >= 0 else roots).append(i)
    order: list[int] = []
    stack = roots[::-1]
    while stack:
        i = stack.pop()
        order.append(i)
        stack.extend(children[i][::-1])
    return order


def format_bvh(clip: Clip, precision: int = 6, raw: bool = False) -> str:
    """BVH text for ``clip``; see :func:`write_bvh`."""
    out = io.StringIO()
    write_bvh_to(clip, out, precision=precision, raw=raw)
    return out.getvalue()


def write_bvh(clip: Clip, path: _PathLike, precision: int = 15, raw: bool = False) -> None:
    """Write ``clip`` as a BVH file.

    Parameters
    ----------
    clip : Clip
    path : str or path-like
    precision : int, optional
        Significant digits printed for offsets and channel values (15 keeps every value a
        file can hold and any clip's scale: a round trip is exact to about 1e-15 relative).
    raw : bool, optional
        Write ``clip.raw_channels`` (the values as read) instead of the unwrapped channels.

    Notes
    -----
    The hierarchy and each node's channel order are kept; nodes are written depth first, which is
    the order a BVH file implies, so a clip built in another hierarchy order gets its columns
    regrouped accordingly.
    """
    with atomic_open(path, "w", encoding="utf-8", newline="\n") as handle:
        write_bvh_to(clip, handle, precision=precision, raw=raw)  # type: ignore[arg-type]


def write_bvh_to(clip: Clip, handle: io.TextIOBase, precision: int = 15, raw: bool = False
                 ) -> None:
    """Write ``clip`` as BVH text to an open text stream (see :func:`write_bvh`)."""
    if clip.translation_space != "parent":
        raise ClipError(f"clip {clip.name!r} has Blender-style bone locations (relative to each "
                        "bone's rest frame), which BVH cannot hold; export it from Blender")
    order = _dfs_order(clip)
    depth = np.zeros(clip.n_nodes, dtype=int)
    for i in order:
        if clip.parents[i] >= 0:
            depth[i] = depth[clip.parents[i]] + 1
    attribute = [c.rpartition(".")[2] for c in clip.channel_names]
    columns: list[int] = []
    lines = ["HIERARCHY"]
    open_nodes: list[int] = []

    def close_until(level: int) -> None:
        while len(open_nodes) > level:
            open_nodes.pop()
            lines.append("\t" * len(open_nodes) + "}")

    for i in order:
        close_until(int(depth[i]))
        tab = "\t" * int(depth[i])
        if clip.end_sites[i]:
            lines.append(f"{tab}End Site")
        else:
            lines.append(f"{tab}{'ROOT' if clip.parents[i] < 0 else 'JOINT'} {clip.node_names[i]}")
        lines.append(tab + "{")
        offset = " ".join(f"{v:.{precision}g}" for v in clip.offsets[i])
        lines.append(f"{tab}\tOFFSET {offset}")
        if not clip.end_sites[i]:
            mine = [c for c in range(clip.n_channels) if clip.channel_nodes[c] == i]
            columns.extend(mine)
            names = " ".join(attribute[c] for c in mine)
            lines.append(f"{tab}\tCHANNELS {len(mine)}" + (f" {names}" if names else ""))
        open_nodes.append(i)
    close_until(0)
    lines += ["MOTION", f"Frames: {clip.n_frames}", f"Frame Time: {clip.frame_time:.10g}"]
    values = clip.raw_channels if raw else clip.channels
    if clip.orients is not None:
        values = _with_orients(clip, values)
    handle.write("\n".join(lines) + "\n")
    _write_rows(handle, values[:, columns], precision)


def _with_orients(clip: Clip, values: np.ndarray) -> np.ndarray:
    """Channel values with each node's orient folded into its rotation channels.

    BVH has no joint orient: a node's local rotation ``orient · R(channels)`` is written as the
    Euler angles of that product in the node's own order, which gives the same world positions.

    Parameters
    ----------
    clip : Clip with ``orients``
    values : (n_frames, n_channels) float64, the clip's layout

    Returns
    -------
    (n_frames, n_channels) float64, rotations unwrapped

    Raises
    ------
    ClipError
        A node with an orient but no rotation channel to carry it.
    """
    assert clip.orients is not None
    out = np.array(values, dtype=np.float64, copy=True)
    for i, order in enumerate(clip.rotation_orders):
        orient = clip.orients[i]
        if np.allclose(orient, np.eye(3)):
            continue
        if len(order) != 3:
            raise ClipError(f"node {clip.node_names[i]!r} has a joint orient but not three "
                            "rotation channels; BVH cannot hold it")
        cols = [c for c in range(clip.n_channels) if clip.channel_nodes[c] == i
                and clip.channel_names[c].rpartition(".")[2] in ROTATION_ATTRIBUTES]
        local = np.matmul(orient, euler_matrices(order, values[:, cols]))
        out[:, cols] = unwrap_euler(Rotation.from_matrix(local).as_euler(order, degrees=True))
    return out

