"""The clip data model: a skeleton, its dense channel curves and the world positions they give.

Conventions
-----------
- Nodes are in hierarchy order (every parent before its children); End Sites are nodes too, with
  no channels, so world positions include the tips of the limbs.
- Channel names are ``"<node>.<attribute>"`` with BVH attributes ``Xposition``, ``Yposition``,
  ``Zposition``, ``Xrotation``, ``Yrotation``, ``Zrotation``. Rotations are in degrees.
- A node's rotation channels, in the order they are listed, are *intrinsic* Euler angles: listed
  ``Z Y X`` means ``R = Rz @ Ry @ Rx`` (scipy order ``"ZYX"``).
- A node's position channels, where present, *replace* the matching component of its rest offset
  (a root or a MotionBuilder-style 6-channel joint stores its full local translation); components
  without a channel keep the offset. This is how Blender and MotionBuilder read BVH.
  Blender's pose bones differ (``translation_space="oriented"``): their location is expressed
  in the bone's rest frame (after ``orients``) and *added* to the rest offset.
- Frames are host frame numbers: frame ``first_frame + i`` is row ``i``.
"""

from __future__ import annotations

import difflib
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import NamedTuple

import numpy as np
from scipy.spatial.transform import Rotation

from sp_core.errors import ClipError
from sp_core.euler import unwrap_euler

POSITION_ATTRIBUTES = ("Xposition", "Yposition", "Zposition")
ROTATION_ATTRIBUTES = ("Xrotation", "Yrotation", "Zrotation")
AXES = "XYZ"
UP_AXES = {"x": 0, "y": 1, "z": 2}
TRANSLATION_SPACES = ("parent", "oriented")

#: Frames per call of the chain kernel (:meth:`Clip.chain_pass`). The rotation matrices of
#: every channel take 670 bytes a frame: on a 36,000-frame take 241 MB, mapped afresh and
#: faulted in at every pass (0.43 s, half of it in page faults); blocks of this size are
#: reused from the heap (0.21 s), and the results are the same to the bit.
FK_BLOCK = 2048

#: Largest magnitude of a channel value or offset (scene units, degrees). No motion comes near
#: it (10,000 km in centimetres, millions of turns); a larger one is a corrupt file, and near
#: 1e154 its squared distances overflow to inf, which no error or key choice survives.
LARGEST_VALUE = 1e9
#: Frame rates a clip may have (fps): a frame an hour to a million frames a second; beyond
#: them the rate is a damaged header, not a capture.
MIN_FPS = 1.0 / 3600.0
MAX_FPS = 1e6
#: The paper's convention: errors are reported in millimetres for a character 1.7 m tall.
REFERENCE_HEIGHT_MM = 1700.0


class Chain(NamedTuple):
    """A clip's skeleton as the kinematic-chain kernels of :mod:`sp_core._fit_kernels` take it
    (after their per-call arrays of channel values and matrices).

    Attributes
    ----------
    offsets : (N, 3) float64
    parents : (N,) int64
    translation : (N, 3) int64
        Translation channel of each node and axis, -1 for none (the offset is kept).
    rot_ptr, rot_chan : (N + 1,), (R,) int64
        Each node's rotation channels in listed order (CSR).
    rot_axis : (C,) int64
        Axis 0, 1, 2 (X, Y, Z) of every rotation channel (0 for translations).
    rot_slot : (C,) int64
        Where each rotation channel's matrix sits in :meth:`Clip.axis_rotations`.
    orients : (N, 3, 3) float64
        The clip's orients, identity where it has none (a writable copy either way: a kernel
        compiled for a read-only array is another signature to compile and cache).
    oriented : bool
        ``translation_space == "oriented"``.
    """

    offsets: np.ndarray
    parents: np.ndarray
    translation: np.ndarray
    rot_ptr: np.ndarray
    rot_chan: np.ndarray
    rot_axis: np.ndarray
    rot_slot: np.ndarray
    orients: np.ndarray
    oriented: bool


def _readonly(array: np.ndarray) -> np.ndarray:
    array.flags.writeable = False
    return array


class Clip:
    """A skeleton with dense animation.

    Parameters
    ----------
    node_names : sequence of str, length n_nodes
        Unique names in hierarchy order (parents first), End Sites included.
    parents : (n_nodes,) int
        Index of each node's parent, -1 for a root.
    offsets : (n_nodes, 3) float64, scene units
        Rest translation of each node relative to its parent.
    end_sites : (n_nodes,) bool
        True for End Site nodes (no channels).
    channel_names : sequence of str, length n_channels
        ``"<node>.<attribute>"``; a node's channels are listed together, rotations in Euler order.
    channels : (n_frames, n_channels) float64
        Channel values per frame; scene units for positions, degrees for rotations.
    fps : float
        Frame rate (frames per second), e.g. 120 for a frame time of 0.0083333 s.
    frame_time : float, optional
        Exact seconds per frame as stored in the source; defaults to ``1 / fps``.
    first_frame : int, optional
        Host frame number of row 0 (BVH files start at 0 unless told otherwise).
    name : str, optional
        Display name (the file stem for files).
    raw_channels : (n_frames, n_channels) float64, optional
        The values as stored in the source before unwrapping; defaults to ``channels``.
    orients : (n_nodes, 3, 3) float64, optional
        Constant rotation of each node applied before its channel rotations (Maya's
        ``jointOrient``: local rotation = orient · R(channels)); identity by default (BVH).
    translation_space : {"parent", "oriented"}, optional
        ``"parent"`` (default; BVH, Maya, MotionBuilder): position channels replace the matching
        components of the offset, in the parent's frame. ``"oriented"`` (Blender pose bones):
        local translation = offset + orient · (position channels, 0 where absent).
    character_height : float, optional, scene units
        The whole character's height when this clip is part of it (a limb a host read under a
        selected bone): :meth:`height` returns it, so errors are in the same millimetres as for
        the whole body. By default the height is measured on this clip's rest pose.
    held_channels : sequence of str, optional
        Channels a host leaves as they are when it writes a reduction (locked, driven): a
        reduction keeps them as captured, so its errors are those of what the host then shows.

    Notes
    -----
    Arrays are read-only: assign a new array to :attr:`channels` to change the animation, which
    also drops the cached world positions.
    """

    def __init__(
        self,
        node_names: Sequence[str],
        parents: Sequence[int] | np.ndarray,
        offsets: np.ndarray,
        end_sites: Sequence[bool] | np.ndarray,
        channel_names: Sequence[str],
        channels: np.ndarray,
        fps: float,
        frame_time: float | None = None,
        first_frame: int = 0,
        name: str = "clip",
        raw_channels: np.ndarray | None = None,
        orients: np.ndarray | None = None,
        units: str | None = None,
        up_axis: str = "y",
        rest_channels: np.ndarray | None = None,
        translation_space: str = "parent",
        character_height: float | None = None,
        held_channels: Sequence[str] = (),
    ) -> None:
        self.name = name
        self.held_channels: tuple[str, ...] = tuple(held_channels)
        if character_height is not None and not (np.isfinite(character_height)
                                                 and character_height > 0):
            raise ClipError(f"character height must be a positive number of scene units, got "
                            f"{character_height!r}")
        self.character_height = None if character_height is None else float(character_height)
        if translation_space not in TRANSLATION_SPACES:
            raise ClipError(f"translation space must be one of {', '.join(TRANSLATION_SPACES)}; "
                            f"got {translation_space!r}")
        self.translation_space = translation_space
        if up_axis.lower() not in UP_AXES:
            raise ClipError(f"up axis must be one of x, y, z; got {up_axis!r}")
        self.units = units
        self.up_axis = up_axis.lower()
        self.node_names: list[str] = list(node_names)
        self.parents = _readonly(np.asarray(parents, dtype=np.int64).copy())
        self.offsets = _readonly(np.asarray(offsets, dtype=np.float64).reshape(-1, 3).copy())
        self.end_sites = _readonly(np.asarray(end_sites, dtype=bool).copy())
        self.channel_names: list[str] = list(channel_names)
        if not (np.isfinite(fps) and fps > 0):
            raise ClipError(f"frame rate must be a positive number, got {fps!r}")
        if not MIN_FPS <= fps <= MAX_FPS:  # (a viewer's timer overflowed at 3e-7 fps)
            raise ClipError(f"frame rate {fps:.6g} fps is outside {MIN_FPS:.6g} to "
                            f"{MAX_FPS:g} fps (a frame every hour to a million a second)")
        self.fps = float(fps)
        self.frame_time = float(frame_time) if frame_time is not None else 1.0 / self.fps
        if int(first_frame) != first_frame:
            raise ClipError(f"first frame must be an integer frame number, got {first_frame!r}")
        self.first_frame = int(first_frame)
        self._validate_hierarchy()
        self.orients: np.ndarray | None = None
        if orients is not None:
            orients = np.asarray(orients, dtype=np.float64)
            if orients.shape != (len(self.node_names), 3, 3) or not np.all(np.isfinite(orients)):
                raise ClipError(f"orients must be finite (n_nodes, 3, 3) rotation matrices, got "
                                f"shape {orients.shape}")
            if not np.allclose(orients, np.eye(3)):
                self.orients = _readonly(orients.copy())
        self._index_channels()
        self._chain: Chain | None = None
        self._positions: np.ndarray | None = None
        self._unwrapped: Clip | None = None
        self._channels = self._checked_channels(channels)
        self.raw_channels = (self._channels if raw_channels is None
                             else self._checked_channels(raw_channels))
        self.rest_channels: np.ndarray | None = None
        if rest_channels is not None:
            rest = np.asarray(rest_channels, dtype=np.float64)
            if rest.shape != (self.n_channels,) or not np.all(np.isfinite(rest)):
                raise ClipError(f"rest channel values must be {self.n_channels} finite numbers, "
                                f"got shape {rest.shape}")
            self.rest_channels = _readonly(rest.copy())

    # ------------------------------------------------------------------ construction helpers
    def _validate_hierarchy(self) -> None:
        n = len(self.node_names)
        if len(set(self.node_names)) != n:
            dup = next(x for x, k in Counter(self.node_names).items() if k > 1)
            raise ClipError(f"node name {dup!r} is used twice; node names must be unique")
        if (self.parents.shape, self.offsets.shape, self.end_sites.shape) != ((n,), (n, 3), (n,)):
            raise ClipError(f"hierarchy arrays disagree: {n} names, parents {self.parents.shape}, "
                            f"offsets {self.offsets.shape}, end_sites {self.end_sites.shape}")
        for i, p in enumerate(self.parents):
            if not -1 <= p < i:
                raise ClipError(f"node {self.node_names[i]!r} has parent index {p}; nodes must be "
                                "in hierarchy order (every parent before its children)")
            if p >= 0 and self.end_sites[p]:
                raise ClipError(f"End Site {self.node_names[p]!r} cannot have children")
        if not np.all(np.isfinite(self.offsets)):
            raise ClipError("node offsets must be finite numbers")
        large = np.abs(self.offsets) > LARGEST_VALUE
        if large.any():
            node = int(np.argwhere(large)[0, 0])
            raise ClipError(f"node {self.node_names[node]!r} has offset "
                            f"{tuple(float(v) for v in self.offsets[node])}: beyond "
                            f"±{LARGEST_VALUE:g}, which no skeleton comes near (a corrupt file?)")

    def _index_channels(self) -> None:
        """Map every channel to its node and axis; derive each node's Euler order."""
        index = {name: i for i, name in enumerate(self.node_names)}
        n = len(self.node_names)
        self._translation_index = np.full((n, 3), -1, dtype=np.int64)
        rotation_index: list[list[int]] = [[] for _ in range(n)]
        orders = [""] * n
        self.channel_nodes = np.empty(len(self.channel_names), dtype=np.int64)
        for c, full in enumerate(self.channel_names):
            node, _, attribute = full.rpartition(".")
            if node not in index:
                raise ClipError(f"channel {full!r} names no node of the clip")
            i = index[node]
            if self.end_sites[i]:
                raise ClipError(f"channel {full!r} is on an End Site; End Sites have no channels")
            self.channel_nodes[c] = i
            if attribute in POSITION_ATTRIBUTES:
                axis = POSITION_ATTRIBUTES.index(attribute)
                if self._translation_index[i, axis] >= 0:
                    raise ClipError(f"channel {full!r} is listed twice")
                self._translation_index[i, axis] = c
            elif attribute in ROTATION_ATTRIBUTES:
                axis_name = AXES[ROTATION_ATTRIBUTES.index(attribute)]
                if axis_name in orders[i]:
                    raise ClipError(f"channel {full!r} is listed twice")
                orders[i] += axis_name
                rotation_index[i].append(c)
            else:
                raise ClipError(f"channel {full!r}: unknown attribute {attribute!r}; expected one "
                                f"of {', '.join(POSITION_ATTRIBUTES + ROTATION_ATTRIBUTES)}")
        self.rotation_orders: list[str] = orders
        self._axis_columns = {axis: np.array(
            [c for i, cols in enumerate(rotation_index) for k, c in enumerate(cols)
             if orders[i][k] == axis], dtype=np.int64) for axis in AXES}
        # where each rotation channel's matrix sits in axis_rotations(): grouped by axis
        grouped = np.concatenate(list(self._axis_columns.values()))
        self._rotation_count = len(grouped)
        self.rotation_slot = np.full(len(self.channel_names), -1, dtype=np.int64)
        self.rotation_slot[grouped] = np.arange(len(grouped))
        self.rotation_slot.flags.writeable = False
        # each channel's axis, by its place in AXES (-1: a translation)
        self._axis_of = np.full(len(self.channel_names), -1, dtype=np.int64)
        for a, axis in enumerate(AXES):
            self._axis_of[self._axis_columns[axis]] = a
        self._rotation_index = [np.asarray(r, dtype=np.int64) for r in rotation_index]
        self.channel_nodes.flags.writeable = False
        self._translation_index.flags.writeable = False

    def _checked_channels(self, values: np.ndarray) -> np.ndarray:
        values = np.asarray(values, dtype=np.float64)
        if values.ndim != 2 or values.shape[1] != len(self.channel_names):
            raise ClipError(f"channel values must have shape (n_frames, {len(self.channel_names)}),"
                            f" got {values.shape}")
        if not values.flags.writeable and values.flags.c_contiguous:
            return values  # already a frozen array (e.g. a view of another clip): share it
        large = np.abs(values) > LARGEST_VALUE  # (NaN is not: the analysis names its frame)
        if large.any():
            row, column = (int(i) for i in np.argwhere(large)[0])
            raise ClipError(f"channel {self.channel_names[column]} is {values[row, column]:g} at "
                            f"frame {self.first_frame + row}: beyond ±{LARGEST_VALUE:g}, which no "
                            "motion comes near (a corrupt file?)")
        return _readonly(np.array(values, dtype=np.float64, copy=True))

    # ------------------------------------------------------------------------ basic properties
    @property
    def channels(self) -> np.ndarray:
        """(n_frames, n_channels) float64: positions in scene units, rotations unwrapped degrees."""
        return self._channels

    @channels.setter
    def channels(self, values: np.ndarray) -> None:
        checked = self._checked_channels(values)
        if checked.shape[0] != self.n_frames:
            raise ClipError(f"new channel values have {checked.shape[0]} frames, the clip has "
                            f"{self.n_frames}; make a new Clip to change the length")
        self._channels = checked
        self._positions = self._unwrapped = None

    @property
    def n_frames(self) -> int:
        return int(self._channels.shape[0])

    @property
    def n_nodes(self) -> int:
        return len(self.node_names)

    @property
    def n_channels(self) -> int:
        return len(self.channel_names)

    @property
    def last_frame(self) -> int:
        """Host frame number of the last row (``first_frame - 1`` for an empty clip)."""
        return self.first_frame + self.n_frames - 1

    @property
    def frames(self) -> np.ndarray:
        """(n_frames,) int64 host frame numbers."""
        return np.arange(self.first_frame, self.first_frame + self.n_frames, dtype=np.int64)

    @property
    def duration(self) -> float:
        """Seconds covered by the clip: ``n_frames * frame_time``."""
        return self.n_frames * self.frame_time

    @property
    def joint_names(self) -> list[str]:
        """Names of the nodes that are not End Sites."""
        return [n for n, e in zip(self.node_names, self.end_sites, strict=True) if not e]

    @property
    def end_site_names(self) -> list[str]:
        return [n for n, e in zip(self.node_names, self.end_sites, strict=True) if e]

    @property
    def root_names(self) -> list[str]:
        return [n for n, p in zip(self.node_names, self.parents, strict=True) if p < 0]

    def node_index(self, name: str) -> int:
        """Index of node ``name``; raises :class:`ClipError` naming close matches if absent."""
        try:
            return self.node_names.index(name)
        except ValueError:
            close = difflib.get_close_matches(name, self.node_names, n=3, cutoff=0.5)
            hint = f"did you mean {', '.join(close)}?" if close else \
                f"nodes: {', '.join(self.node_names[:8])}{', ...' if self.n_nodes > 8 else ''}"
            raise ClipError(f"no node named {name!r} in clip {self.name!r} ({hint})") from None

    def frame_index(self, frame: int) -> int:
        """Row of host frame ``frame``; raises :class:`ClipError` outside the clip."""
        if int(frame) != frame or not self.first_frame <= frame <= self.last_frame:
            raise ClipError(f"frame {frame} is outside clip {self.name!r} "
                            f"(frames {self.first_frame}..{self.last_frame})")
        return int(frame) - self.first_frame

    def node_channels(self, name: str) -> list[int]:
        """Column indices of the channels of node ``name``, in listed order."""
        i = self.node_index(name)
        return [c for c in range(self.n_channels) if self.channel_nodes[c] == i]

    def is_rotation_channel(self) -> np.ndarray:
        """(n_channels,) bool: True for rotation channels (degrees)."""
        return np.array([c.rpartition(".")[2] in ROTATION_ATTRIBUTES for c in self.channel_names],
                        dtype=bool)

    # ------------------------------------------------------------------------ kinematics
    @property
    def positions(self) -> np.ndarray:
        """(n_frames, n_nodes, 3) float64 world positions, scene units; End Sites included.

        Computed by forward kinematics on first use and cached until :attr:`channels` changes.
        """
        if self._positions is None:
            self._positions = _readonly(self.forward_kinematics(self._channels))
        return self._positions

    def forward_kinematics(self, channels: np.ndarray) -> np.ndarray:
        """World positions of every node for the given channel values.

        Parameters
        ----------
        channels : (n_frames, n_channels) float64
            Values in this clip's channel layout (any number of frames).

        Returns
        -------
        (n_frames, n_nodes, 3) float64, scene units

        One pass down the chain per frame in a numba kernel, the channels' single-axis
        matrices from scipy (:meth:`axis_rotations`): on the sample 4.3 ms, where a chain of
        numpy operations per node took 17 ms (a default reduction runs it about ten times).
        """
        channels = np.ascontiguousarray(channels, dtype=np.float64)
        if channels.ndim != 2 or channels.shape[1] != self.n_channels:
            raise ClipError(f"channel values must have shape (n_frames, {self.n_channels}), "
                            f"got {channels.shape}")
        return self.chain_pass(channels)[0]

    def chain_pass(self, channels: np.ndarray, slot: np.ndarray | None = None,
                   n_free: int = 0) -> tuple[np.ndarray, np.ndarray]:
        """World positions of every node, and the world directions of the ``n_free``
        channels ``slot`` places (:func:`sp_core._fit_kernels.chain_kinematics`), a block of
        :data:`FK_BLOCK` frames at a time.

        Parameters
        ----------
        channels : (F, n_channels) float64, C-contiguous
        slot : (n_channels,) int64, optional
            Each channel's place among the directions wanted, -1 for none (default: none).
        n_free : int

        Returns
        -------
        positions : (F, n_nodes, 3) float64
        axes : (F, n_free, 3) float64
        """
        from sp_core._fit_kernels import chain_kinematics

        chain = self.chain()
        if slot is None:
            slot = np.full(self.n_channels, -1, dtype=np.int64)
        skeleton = (chain.offsets, chain.parents, chain.translation, chain.rot_ptr,
                    chain.rot_chan, chain.rot_axis, chain.rot_slot, chain.orients, slot, n_free,
                    chain.oriented)
        n_frames = len(channels)
        if n_frames <= FK_BLOCK:
            return chain_kinematics(channels, self.axis_rotations(channels), *skeleton)
        positions = np.empty((n_frames, self.n_nodes, 3))
        axes = np.empty((n_frames, n_free, 3))
        for lo in range(0, n_frames, FK_BLOCK):
            block = channels[lo:lo + FK_BLOCK]
            positions[lo:lo + len(block)], axes[lo:lo + len(block)] = chain_kinematics(
                block, self.axis_rotations(block), *skeleton)
        return positions, axes

    def chain(self) -> Chain:
        """The skeleton as the kinematic-chain kernels take it (made once per clip)."""
        if self._chain is None:
            rot_axis = np.zeros(self.n_channels, dtype=np.int64)
            for i, columns in enumerate(self._rotation_index):
                for k, c in enumerate(columns):
                    rot_axis[c] = AXES.index(self.rotation_orders[i][k])
            counts = [len(columns) for columns in self._rotation_index]
            self._chain = Chain(
                offsets=np.ascontiguousarray(self.offsets), parents=self.parents,
                translation=np.ascontiguousarray(self._translation_index),
                rot_ptr=np.concatenate([[0], np.cumsum(counts)]).astype(np.int64),
                rot_chan=np.concatenate([*self._rotation_index, np.zeros(0, np.int64)]),
                rot_axis=rot_axis, rot_slot=self.rotation_slot,
                orients=np.array(np.broadcast_to(np.eye(3), (self.n_nodes, 3, 3))
                                 if self.orients is None else self.orients,
                                 dtype=np.float64, order="C"),
                oriented=self.translation_space == "oriented")
        return self._chain

    def axis_rotations(self, channels: np.ndarray) -> np.ndarray:
        """(n_frames, n_rotation_channels, 3, 3) float64: each rotation channel's single-axis
        rotation matrix per frame; channel c's is at ``[:, rotation_slot[c]]``.

        scipy converts one axis for many angles in one call: all channels that turn about the
        same axis go through one ``from_euler`` call (three calls in all instead of one per
        channel, whose fixed cost dominated forward kinematics on short clips). A node's local
        rotation is the product of its channels' matrices in listed order.
        """
        channels = np.asarray(channels, dtype=np.float64)
        n_frames = channels.shape[0]
        result = np.empty((n_frames, self._rotation_count, 3, 3))
        start = 0
        for axis, columns in self._axis_columns.items():
            if len(columns) and n_frames:
                angles = channels[:, columns].reshape(-1, 1)
                result[:, start:start + len(columns)] = Rotation.from_euler(
                    axis, angles, degrees=True).as_matrix().reshape(n_frames, len(columns), 3, 3)
            start += len(columns)
        return result

    def channel_turns(self, angles: np.ndarray, columns: np.ndarray) -> np.ndarray:
        """(n, 3, 3) float64: the single-axis rotation matrix of rotation channel
        ``columns[i]`` at ``angles[i]`` degrees, as :meth:`axis_rotations` makes it (one
        ``from_euler`` call per axis).

        Parameters
        ----------
        angles : (n,) float64, degrees
        columns : (n,) int
            Rotation channels (indices into :attr:`channel_names`).
        """
        angles = np.asarray(angles, dtype=np.float64)
        columns = np.asarray(columns, dtype=np.int64)
        out = np.empty((len(angles), 3, 3))
        axis_of = self._axis_of[columns]
        for a, axis in enumerate(AXES):
            here = np.flatnonzero(axis_of == a)
            if len(here):
                out[here] = Rotation.from_euler(axis, angles[here].reshape(-1, 1),
                                                degrees=True).as_matrix()
        return out

    def position_jacobian(self, channels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """World positions and their derivatives with respect to every channel.

        The geometric Jacobian of the skeleton: a translation channel of node j moves j and its
        descendants along the parent's world axis; a rotation channel turns them about its world
        axis (the parent's world rotation times the Euler rotations listed before it) through
        j's position.

        Parameters
        ----------
        channels : (n_frames, n_channels) float64
            Values in this clip's channel layout.

        Returns
        -------
        positions : (n_frames, n_nodes, 3) float64, scene units
        jacobian : (n_frames, n_nodes, 3, n_channels) float64
            Scene units per channel unit (per degree for rotation channels).
        """
        channels = np.asarray(channels, dtype=np.float64)
        n_frames = channels.shape[0]
        positions = self.forward_kinematics(channels)
        jacobian = np.zeros((n_frames, self.n_nodes, 3, self.n_channels))
        below = self._subtrees()
        world = np.empty((self.n_nodes, n_frames, 3, 3))
        identity = np.broadcast_to(np.eye(3), (n_frames, 3, 3))
        for i in range(self.n_nodes):
            p = self.parents[i]
            parent_r = identity if p < 0 else world[p]
            nodes = below[i]
            partial = parent_r if self.orients is None else np.matmul(parent_r, self.orients[i])
            # a position channel moves along its axis in the parent's frame, or in the node's
            # oriented frame for Blender-style locations
            moving = partial if self.translation_space == "oriented" else parent_r
            for axis in range(3):
                c = self._translation_index[i, axis]
                if c >= 0:
                    jacobian[..., c][:, nodes] = moving[:, None, :, axis]
            arms = positions[:, nodes] - positions[:, i:i + 1]
            order = self.rotation_orders[i]
            for k, c in enumerate(self._rotation_index[i]):
                axis = AXES.index(order[k])
                turn = np.cross(partial[:, None, :, axis], arms)
                jacobian[..., c][:, nodes] = turn * (np.pi / 180.0)
                single = Rotation.from_euler(order[k], channels[:, c:c + 1],
                                             degrees=True).as_matrix()
                partial = np.matmul(partial, single)
            world[i] = partial
        return positions, jacobian

    def unseen_rotations(self) -> list[str]:
        """The rotation channels that turn no node: every node below theirs (none, for a
        joint without a child or End Site; or all at its point, offsets of zero) stays where
        it is on every frame. World positions do not see them: neither the selection's pose
        distances nor the errors (a spinning prop without an End Site was reduced to two keys
        with a "max 0" error, 71 degrees off)."""
        rotation = self.is_rotation_channel()
        positions = self.positions
        scale = max(float(np.abs(positions).max(initial=0.0)), 1.0)
        turning = np.zeros(self.n_nodes, dtype=bool)
        for j, members in enumerate(self._subtrees()):
            # (node by node, the nearest first: one is away from j on almost every skeleton)
            turning[j] = any(np.abs(positions[:, d] - positions[:, j]).max(initial=0.0)
                             > 1e-9 * scale for d in members if d != j)
        return [name for c, name in enumerate(self.channel_names)
                if rotation[c] and not turning[self.channel_nodes[c]]]

    def _subtrees(self) -> list[np.ndarray]:
        """For every node, the indices of itself and all its descendants."""
        members: list[list[int]] = [[i] for i in range(self.n_nodes)]
        for i in range(self.n_nodes - 1, 0, -1):  # parents precede children
            p = self.parents[i]
            if p >= 0:
                members[p].extend(members[i])
        return [np.asarray(sorted(m), dtype=np.int64) for m in members]

    def rest_positions(self) -> np.ndarray:
        """(n_nodes, 3) float64 positions of the rest pose (offsets and orients, no channels, or
        :attr:`rest_channels` where the source has them), scene units."""
        if self.rest_channels is not None:
            return self.forward_kinematics(self.rest_channels[None])[0]
        rest = np.zeros((self.n_nodes, 3))
        turn = np.zeros((self.n_nodes, 3, 3))
        for i, p in enumerate(self.parents):
            parent = np.eye(3) if p < 0 else turn[p]
            rest[i] = parent @ self.offsets[i] + (rest[p] if p >= 0 else 0.0)
            turn[i] = parent if self.orients is None else parent @ self.orients[i]
        return rest

    def height(self, up_axis: str | None = None) -> float:
        """The character's height in scene units, for the paper's millimetre error convention.

        The :attr:`character_height` the clip was made with (a height along the clip's own
        up axis: asked along another axis, the rest pose is measured), else measured on the rest
        pose (every node at its offsets, no channels applied, or the source's
        :attr:`rest_channels`): the extent of all nodes, End Sites included (toe tip to head
        top), along ``up_axis``. Rest poses are standing poses in practice, unlike animated
        frames (crouches, jumps) or the T-pose's arm span. Degenerate skeletons fall back to the
        largest rest extent on any axis, then to the largest extent of the animated positions.

        Parameters
        ----------
        up_axis : {"x", "y", "z"}, optional
            The world up axis; default the clip's :attr:`up_axis` (BVH and CMU use Y up).

        Returns
        -------
        float, scene units, > 0

        Raises
        ------
        ClipError
            If every node stays at one point, or the skeleton has one joint (End Sites aside),
            so no size can be measured.
        """
        up_axis = self.up_axis if up_axis is None else up_axis
        if up_axis.lower() not in UP_AXES:
            raise ClipError(f"up axis must be one of x, y, z; got {up_axis!r}")
        if self.character_height is not None and up_axis.lower() == self.up_axis:
            return self.character_height
        if np.count_nonzero(~self.end_sites) < 2:
            # one joint is no body: an End Site's offset (or a host's bone length: Blender's
            # BVH importer gives a joint without one 0.1 units) is not a character's size,
            # and the hosts measured different ones for the same file
            raise ClipError(f"clip {self.name!r} has one joint, no body whose size the errors "
                            "can be measured against")
        rest = self.rest_positions()
        extent = np.ptp(rest, axis=0)
        for value in (extent[UP_AXES[up_axis.lower()]], extent.max()):
            if value > 1e-9:
                return float(value)
        # (only now: over every frame of a long take this costs tens of milliseconds, and a
        # reduction asks for the scale of its clip at every K the search fits)
        if self.n_frames:
            value = float(np.ptp(self.positions, axis=1).max())
            if value > 1e-9:
                return value
        raise ClipError(f"clip {self.name!r} has no measurable size: every node is at one point")

    def not_a_number(self) -> tuple[str, np.ndarray] | None:
        """The first channel value that is NaN or infinite, said as ``"<channel> is not a
        number (NaN or infinity) at frame F (and N more values)"``, with the (n_frames,) bool
        rows holding one; None if every value is finite. (Host applications let a NaN key
        through; the analysis and the fit name it alike.)"""
        bad = ~np.isfinite(self.channels)
        if not bad.any():
            return None
        row, column = (int(i) for i in np.argwhere(bad)[0])
        more = int(bad.sum()) - 1
        others = f" (and {more} more value{'s' if more > 1 else ''})" if more else ""
        return (f"{self.channel_names[column]} is not a number (NaN or infinity) at frame "
                f"{self.first_frame + row}{others}", bad.any(axis=1))

    @property
    def held(self) -> np.ndarray:
        """(n_channels,) bool: the channels of :attr:`held_channels` (kept as captured)."""
        held = set(self.held_channels)
        return np.array([name in held for name in self.channel_names], dtype=bool)

    def mm_per_unit(self, up_axis: str | None = None) -> float:
        """Millimetres per scene unit for the character scaled to 1.7 m (the paper's convention)."""
        return REFERENCE_HEIGHT_MM / self.height(up_axis)

    # --------------------------------------------------------------------------- sub-clips
    def _derived(self, **changes: object) -> Clip:
        fields: dict[str, object] = dict(
            node_names=self.node_names, parents=self.parents, offsets=self.offsets,
            end_sites=self.end_sites, channel_names=self.channel_names, channels=self._channels,
            fps=self.fps, frame_time=self.frame_time, first_frame=self.first_frame, name=self.name,
            raw_channels=self.raw_channels, orients=self.orients, units=self.units,
            up_axis=self.up_axis, rest_channels=self.rest_channels,
            translation_space=self.translation_space, character_height=self.character_height,
            held_channels=self.held_channels)
        fields.update(changes)
        return Clip(**fields)  # type: ignore[arg-type]

    def with_channels(self, channels: np.ndarray, raw_channels: np.ndarray | None = None) -> Clip:
        """A clip with the same skeleton and timing and new channel values (any frame count)."""
        return self._derived(channels=channels, raw_channels=raw_channels)

    def sub_range(self, start: int, end: int) -> Clip:
        """Frames ``start`` to ``end`` inclusive (host frames), sharing memory with this clip.

        Raises
        ------
        ClipError
            If the range is empty or not inside the clip.
        """
        if end < start:
            raise ClipError(f"empty frame range {start}:{end}; the end must not be before the "
                            "start")
        a, b = self.frame_index(start), self.frame_index(end) + 1
        sub = self._derived(channels=self._channels[a:b], raw_channels=self.raw_channels[a:b],
                            first_frame=start)
        if self._positions is not None:
            sub._positions = self._positions[a:b]
        return sub

    def sub_nodes(self, names: Iterable[str]) -> Clip:
        """The named nodes with their ancestors (needed for world positions) and their End Sites.

        Only the channel columns of the kept nodes are copied; cached positions are sliced.
        """
        wanted = {self.node_index(n) for n in names}
        keep = set()
        for i in wanted:
            while i >= 0 and i not in keep:
                keep.add(i)
                i = int(self.parents[i])
        keep |= {i for i in range(self.n_nodes) if self.end_sites[i] and self.parents[i] in keep}
        sub = self._kept(sorted(keep))
        if self._positions is not None:
            sub._positions = _readonly(self._positions[:, sorted(keep)])
        return sub

    def subtrees(self, roots: Iterable[str]) -> Clip:
        """The nodes under ``roots`` (the roots and End Sites included) as a clip of their own.

        Each root moves in its parent's frame, as Maya and MotionBuilder read a selected joint:
        a limb's reduction then keys the limb and nothing that carries it (keying its ancestors
        too would move the rest of the body). Distances, and so errors, are the same as in the
        world frame. The height stays the whole character's (:attr:`character_height`), so the
        errors are in the same millimetres as for the whole body.
        """
        inside = {self.node_index(n) for n in roots}
        for i in range(self.n_nodes):  # parents come before their children
            if int(self.parents[i]) in inside:
                inside.add(i)
        try:
            height: float | None = self.height()
        except ClipError:
            height = None
        kept = sorted(inside)
        sub = self._kept(kept, character_height=height)
        if self._positions is not None and all(self.parents[i] < 0 or self.parents[i] in inside
                                               for i in kept):
            sub._positions = _readonly(self._positions[:, kept])
        return sub

    def _kept(self, kept: list[int], **changes: object) -> Clip:
        """The nodes ``kept`` (sorted indices) with their channel columns; a node whose parent
        is not kept becomes a root."""
        keep = set(kept)
        remap = {old: new for new, old in enumerate(kept)}
        columns = [c for c in range(self.n_channels) if self.channel_nodes[c] in keep]
        return self._derived(
            node_names=[self.node_names[i] for i in kept],
            parents=[remap.get(int(self.parents[i]), -1) for i in kept],
            offsets=self.offsets[kept], end_sites=self.end_sites[kept],
            channel_names=[self.channel_names[c] for c in columns],
            channels=self._channels[:, columns], raw_channels=self.raw_channels[:, columns],
            orients=None if self.orients is None else self.orients[kept],
            rest_channels=None if self.rest_channels is None else self.rest_channels[columns],
            **changes)

    def unwrapped(self) -> Clip:
        """This clip with continuous rotation curves (see :func:`sp_core.euler.unwrap_euler`).

        Every frame keeps its pose; :attr:`raw_channels` keeps the values before unwrapping.
        Made once per clip (until :attr:`channels` changes): a tolerance's search reduces the
        same range a dozen times.
        """
        if self._unwrapped is not None:
            return self._unwrapped
        values = self._channels.copy()
        for cols in self._rotation_index:
            if len(cols):
                values[:, cols] = unwrap_euler(self._channels[:, cols])
        unwrapped = self._derived(channels=values, raw_channels=self.raw_channels)
        if self._positions is not None and np.array_equal(values, self._channels):
            unwrapped._positions = self._positions  # nothing wrapped: the same positions
        self._unwrapped = unwrapped
        return unwrapped

    def __repr__(self) -> str:
        return (f"Clip({self.name!r}, frames {self.first_frame}..{self.last_frame} at "
                f"{self.fps:g} fps, {self.n_nodes} nodes, {self.n_channels} channels)")
