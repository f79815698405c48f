"""Magic wand: spread a pose edit over the motion with a data-driven falloff (Dean, Lewis and
Chalmers, "A Magic Wand for Motion Capture Editing and Edit Propagation", SIGGRAPH Asia 2018).

Frames are nodes of a pose graph weighted by a Gaussian kernel of their pose distance; the
falloff of an edit at frame i is row i of the Green's function of the graph's normalised
Laplacian, G(i, j) = Σ_{k>0} φ_k(i) φ_k(j) / λ_k over its first eigenpairs. It follows the
motion: in ``global`` mode an edit reaches every similar pose (all steps of a walk cycle); in
``local`` mode only the stretch of the timeline connected to the edit.

The edit itself — the difference between the edited and the original pose at frame i, rotations
as rotation vectors (log-quaternions), translations as differences — is applied to frame j with
weight w_j: R_j' = exp(w_j · log ΔR) · R_j, t_j' = t_j + w_j · Δt, and turned back into each
node's Euler order as the angles nearest the original's plus w_j times the edit's angles (the
frames the falloff does not reach keep their values exactly).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np
import scipy.linalg
import scipy.sparse
import scipy.sparse.csgraph
import scipy.sparse.linalg
from scipy.spatial import cKDTree
from scipy.spatial.transform import Rotation

from sp_core.clip import Clip
from sp_core.errors import SelectionError
from sp_core.euler import nearest_euler, wrap_degrees
from sp_core.poses import pose_matrix

MODES = ("local", "global")
#: Eigenpairs kept by default (few: the falloff is then round at the edited frame, not a corner;
#: 40 already gives pointed peaks on a walk cycle), and the clip length above which the kernel is
#: a sparse k-nearest-neighbour graph (dense eigendecomposition is cubic in the length).
EIGEN = 12
DENSE_LIMIT = 2500
NEIGHBOURS = 30
#: Local mode: the edit stops where the falloff first drops below this on either side.
LOCAL_FLOOR = 0.02
#: Second-smallest Laplacian eigenvalue under which the pose graph has fallen apart (a sigma
#: far under the poses' distances: no frame is similar to another, the Green's function is
#: undefined and its falloff was noise scaled to [0, 1]; the sample at sigma 0.1: every frame
#: at 1). At sigma 0.5 on the sample it is 2e-9, at its default 0.007.
CONNECTED = 1e-10
#: An adapted sigma under which the graph falls apart (a motion that holds one pose most of
#: the time) is multiplied by ADAPT_GROWTH up to ADAPT_STEPS - 1 times.
ADAPT_STEPS = 8
ADAPT_GROWTH = 4.0
#: Long clips' sparse graphs: edges lighter than this share of the heaviest join nothing.
SPARSE_JOIN = 1e-12


def wand_poses(clip: Clip, pose: str = "positions", nodes: list[str] | None = None,
               weights: dict[str, float] | None = None) -> np.ndarray:
    """Poses for pose similarity: :func:`sp_core.poses.pose_matrix` with positions taken
    relative to the root, so the steps of a walk look alike wherever they happen."""
    return pose_matrix(clip, pose, nodes, weights, root_relative=True)


def clip_graph(clip: Clip, pose: str = "positions", nodes: Sequence[str] | None = None,
               weights: Mapping[str, float] | None = None, time_scale: float = 0.0,
               sigma: float | None = None, eigen: int = EIGEN) -> PoseGraph:
    """The pose graph of ``clip`` with the analysis options every front passes (the command
    line left out the weights, the panel the time scale: the same options gave other
    falloffs)."""
    poses = wand_poses(clip, pose, None if nodes is None else list(nodes),
                       dict(weights) if weights else None)
    return PoseGraph(poses, first_frame=clip.first_frame, sigma=sigma, eigen=eigen,
                     time_scale=time_scale)


class PoseGraph:
    """The eigenpairs of a motion's pose graph, from which falloffs are read cheaply.

    Parameters
    ----------
    poses : (n_frames, n_dims) float64
        One row per frame (e.g. :func:`sp_core.poses.pose_matrix`).
    first_frame : int
        Host frame of row 0.
    sigma : float, optional
        Kernel width in pose units (default: the median distance of a frame to its
        ``NEIGHBOURS``-th nearest pose, which adapts to the motion's scale and speed, grown
        until the graph holds together: see :data:`ADAPT_STEPS`).
    eigen : int
        Eigenpairs kept (the truncation m of the Green's function).
    time_scale : float
        Adds ``time_scale × frame index`` as a coordinate, so nearby frames count as similar.
    """

    def __init__(self, poses: np.ndarray, first_frame: int = 0, sigma: float | None = None,
                 eigen: int = EIGEN, time_scale: float = 0.0) -> None:
        poses = np.asarray(poses, dtype=np.float64)
        n = len(poses)
        if n < 3:
            raise SelectionError(f"a falloff needs at least 3 frames, the range has {n}")
        if not np.all(np.isfinite(poses)):
            raise SelectionError("pose data is not finite (NaN or infinity)")
        if time_scale:
            poses = np.column_stack([poses, time_scale * np.arange(n)])
        self.first_frame = int(first_frame)
        self.n_frames = n
        # every frame the same pose (a still take): all are the edited pose, so the edit
        # reaches each in full; the graph's eigenvectors past the first are then any basis
        # of a degenerate space, and a falloff read from them was noise (0.3-0.6 frame to
        # frame)
        self.still = bool(np.ptp(poses, axis=0).max(initial=0.0)
                          <= 1e-9 * (1.0 + float(np.abs(poses).max(initial=0.0))))
        tree = cKDTree(poses)
        k = min(NEIGHBOURS, n - 1)
        distances, neighbours = tree.query(poses, k=k + 1)
        adapted = float(np.median(distances[:, -1])) or 1.0
        given = sigma is not None
        sigma = adapted if sigma is None else sigma
        if not sigma > 0:
            raise SelectionError(f"sigma must be positive, got {sigma}")
        self.eigen = int(min(max(eigen, 2), n - 1))
        if n <= DENSE_LIMIT:
            norms = np.einsum("ij,ij->i", poses, poses)
            squared = np.maximum(norms[:, None] + norms[None, :] - 2.0 * poses @ poses.T, 0.0)

            def spectrum(width: float) -> tuple[np.ndarray, np.ndarray] | None:
                kernel = np.exp(-squared / (2.0 * width**2))
                scale = 1.0 / np.sqrt(kernel.sum(axis=1))
                adjacency = kernel * scale[:, None] * scale[None, :]
                return scipy.linalg.eigh(adjacency, driver="evr",
                                         subset_by_index=[n - self.eigen, n - 1])
        else:
            rows = np.repeat(np.arange(n), k + 1)
            # each frame's pose is joined to the next frame's too: a cycle repeated exactly
            # (a loop played over and over) has its NEIGHBOURS nearest poses all copies of
            # itself, and its graph fell into one piece per pose of the cycle whatever sigma
            steps = np.linalg.norm(np.diff(poses, axis=0), axis=1)

            def spectrum(width: float) -> tuple[np.ndarray, np.ndarray] | None:
                weights = np.exp(-distances.ravel() ** 2 / (2.0 * width**2))
                kernel = scipy.sparse.coo_matrix((weights, (rows, neighbours.ravel())),
                                                 shape=(n, n)).tocsr()
                chain = scipy.sparse.diags(np.exp(-steps**2 / (2.0 * width**2)), 1,
                                           shape=(n, n), format="csr")
                kernel = kernel.maximum(kernel.T).maximum(chain).maximum(chain.T)
                # a graph in pieces (to the weights' precision) has no falloff, and ARPACK
                # took 50 s not to converge on one (a long hold at its adapted sigma)
                joined = kernel.multiply(kernel > SPARSE_JOIN * kernel.max())
                if scipy.sparse.csgraph.connected_components(joined, directed=False)[0] > 1:
                    return None
                scale = scipy.sparse.diags(1.0 / np.sqrt(np.asarray(kernel.sum(axis=1)).ravel()))
                try:
                    return scipy.sparse.linalg.eigsh(scale @ kernel @ scale, k=self.eigen,
                                                     which="LA")
                except scipy.sparse.linalg.ArpackNoConvergence:
                    return None

        # an adapted sigma grows until the graph holds together: a long hold (the same pose
        # to within noise for most frames) makes the median distance to the NEIGHBOURS-th
        # pose that noise, and the graph fell apart at its own default
        for _ in range(1 if given else ADAPT_STEPS):
            self.sigma = float(sigma)
            found = spectrum(self.sigma)
            if found is not None:
                values, vectors = found
                order = np.argsort(values)[::-1]  # largest adjacency eigenvalue: smallest
                self.laplacian_values = np.clip(1.0 - values[order], 0.0, None)  # Laplacian
                self.vectors = vectors[:, order]
                if self.still or self.laplacian_values[1] >= CONNECTED:
                    return
            sigma *= ADAPT_GROWTH
        if given:
            raise SelectionError(
                f"sigma {self.sigma:.4g} is too small for this motion: no pose is within reach "
                "of another, so the edit has nowhere to spread (a smaller sigma makes fewer "
                "poses alike; it does not narrow the falloff in time: the region and local mode "
                "do); raise sigma, or leave it unset to let it adapt to the motion",
                options=("sigma",))
        raise SelectionError(
            f"the poses of this motion stay apart even at sigma {self.sigma:.4g}, so the edit "
            "has nowhere to spread; give a larger sigma", options=("sigma",))

    def green_row(self, frame: int) -> np.ndarray:
        """G(i, ·) for host frame ``frame``, skipping the first (constant-like) eigenpair."""
        i = self._row(frame)
        values = np.maximum(self.laplacian_values[1:], 1e-12)
        return self.vectors[:, 1:] @ (self.vectors[i, 1:] / values)

    def weights(self, frame: int, region: tuple[int, int] | None = None,
                mode: str = "local", open_ends: tuple[bool, bool] = (False, False)
                ) -> np.ndarray:
        """Falloff of an edit at ``frame``: 1 there, 0 at the least similar pose of the region.

        Parameters
        ----------
        frame : int
            Host frame of the edit.
        region : (int, int), optional
            Inclusive host frames the edit may reach (default all); 0 outside.
        mode : {"local", "global"}
            ``local`` keeps only the stretch of the timeline connected to the edit (it stops
            where the falloff first drops to ``LOCAL_FLOOR``); ``global`` reaches every similar
            pose in the region.
        open_ends : (bool, bool)
            The scene goes on before the first and after the last analysed frame (a panel's
            range of a longer take): the falloff fades out there too, as at a region's edge (an
            edit's layer keyed on the range alone started at full strength on its first frame).

        Returns
        -------
        (n_frames,) float64 in [0, 1]
            1 on the whole region when every frame has the same pose; then, in every case, 0
            at the region's edges inside the clip other than the edited frame, faded in and
            out over half the way to the edited frame, at most a quarter of the region (a
            region that starts or ends on the edited frame starts or ends with it in full).
        """
        if mode not in MODES:
            raise SelectionError(f"mode must be 'local' or 'global', got {mode!r}")
        i = self._row(frame)
        lo, hi = (0, self.n_frames - 1) if region is None else \
            (self._row(region[0]), self._row(region[1]))
        if not lo <= i <= hi:
            raise SelectionError(f"the edited frame {frame} is outside the region "
                                 f"{region[0] if region else ''}..{region[1] if region else ''}")
        g = self.green_row(frame)
        inside = g[lo:hi + 1]
        low, top = float(inside.min()), float(g[i])
        weights = np.zeros(self.n_frames)
        if top > low and not self.still:
            weights[lo:hi + 1] = np.clip((inside - low) / (top - low), 0.0, 1.0)
        else:
            weights[lo:hi + 1] = 1.0
        weights[lo:hi + 1] *= _fades(lo, hi, i, self.n_frames, open_ends)
        if mode == "local":
            left = i
            while left > lo and weights[left - 1] > LOCAL_FLOOR:
                left -= 1
            right = i
            while right < hi and weights[right + 1] > LOCAL_FLOOR:
                right += 1
            weights[:left] = 0.0
            weights[right + 1:] = 0.0
        return weights

    def _row(self, frame: int) -> int:
        row = int(frame) - self.first_frame
        if not 0 <= row < self.n_frames:
            raise SelectionError(f"frame {frame} is outside the analysed frames "
                                 f"{self.first_frame}..{self.first_frame + self.n_frames - 1}")
        return row


def _fades(lo: int, hi: int, edited: int, n: int,
           open_ends: tuple[bool, bool] = (False, False)) -> np.ndarray:
    """(hi - lo + 1,) factors in [0, 1] that take the falloff to 0 at a region's edges inside
    the clip (rows ``lo``, ``hi`` of ``n``): a smoothstep over half the way from the edge to the
    edited row, at most a quarter of the region. Without it the edit popped in at the edge (a
    30-degree step from one frame to the next); the clip's own ends need none unless
    ``open_ends`` says the scene goes on past them (a panel's analysed range), nor does an edge
    on the edited frame."""
    rows = np.arange(lo, hi + 1, dtype=np.float64)
    factors = np.ones(len(rows))
    for edge, inward in ((lo, 1.0), (hi, -1.0)):
        end = (edge == 0 and not open_ends[0]) or (edge == n - 1 and not open_ends[1])
        if end or edge == edited:
            continue
        length = max(1.0, min(abs(edited - edge) / 2.0, (hi - lo) / 4.0))
        t = np.clip(inward * (rows - edge) / length, 0.0, 1.0)
        factors *= t * t * (3.0 - 2.0 * t)
    return factors


@dataclass(frozen=True)
class PoseEdit:
    """What changed at the edited frame: per node a rotation and a translation.

    Attributes
    ----------
    rotations : dict of int to Rotation
        Node index → ΔR with R_edited = ΔR · R_original (nodes with three rotation channels).
    offsets : dict of int to float
        Channel index → difference, for translations (and for rotations of nodes with fewer
        than three rotation channels, which add like translations).
    turns : dict of int to (3,) float64 array
        Node index → the edit as Euler angles (degrees, listed order, each within half a
        turn): the edited channels minus the original's (typed offsets as typed, see
        :func:`pose_edit`). :func:`propagate` writes each frame as the angles nearest the
        original's plus the weight times these.
    """

    rotations: dict[int, Rotation]
    offsets: dict[int, float]
    turns: dict[int, np.ndarray] = field(default_factory=dict)


def pose_edit(clip: Clip, frame: int, edited: np.ndarray, typed: bool = False) -> PoseEdit:
    """The edit that turns the clip's pose at ``frame`` into the ``edited`` channel values (C,).

    ``typed``: the edited values are the clip's plus offsets the user typed (at most half a
    turn each), whose Euler angles :attr:`PoseEdit.turns` keeps as typed; otherwise (a host's
    pose, an edited file) a joint's three rotations count as the triplet of the edited pose
    nearest the clip's (a whole turn, or the other triplet of the same pose, is no edit).
    """
    row = clip.frame_index(frame)
    original = clip.channels[row]
    edited = np.asarray(edited, dtype=np.float64)
    if edited.shape != original.shape:
        raise SelectionError(f"the edited pose must be {original.shape[0]} finite channel "
                             f"values, got shape {edited.shape}")
    if not np.all(np.isfinite(edited)):  # (it said "got shape (96,)" of 96 values)
        bad = [clip.channel_names[c] for c in np.flatnonzero(~np.isfinite(edited))]
        raise SelectionError(f"the edited pose must be {original.shape[0]} finite channel "
                             f"values; {', '.join(bad[:4])}{' ...' if len(bad) > 4 else ''} "
                             "is not a number")
    rotations: dict[int, Rotation] = {}
    offsets: dict[int, float] = {}
    turns: dict[int, np.ndarray] = {}
    rotation = clip.is_rotation_channel()
    for node in range(clip.n_nodes):
        columns = clip._rotation_index[node]
        if len(columns) == 3:
            order = clip.rotation_orders[node]
            before = Rotation.from_euler(order, original[columns], degrees=True)
            after = Rotation.from_euler(order, edited[columns], degrees=True)
            rotations[node] = after * before.inv()
            target = edited[columns] if typed else \
                nearest_euler(edited[None, columns], original[None, columns])[0]
            turns[node] = wrap_degrees(target - original[columns])
    for c in range(clip.n_channels):
        three = rotation[c] and len(clip._rotation_index[clip.channel_nodes[c]]) == 3
        if not three and edited[c] != original[c]:
            offsets[c] = float(edited[c] - original[c])
    return PoseEdit(rotations, offsets, turns)


def edited_frame(clip: Clip, other: Clip, frame: int, source: str) -> np.ndarray:
    """(C,) the channel values of ``other`` (the pose edited elsewhere, read from ``source``)
    at host frame ``frame``, as an edit of ``clip``'s pose there (:func:`pose_edit`).

    ``other`` must hold the clip's channels in the clip's joint frames: a BVH written from an
    FBX take folds the joint orients into its rotation channels, so the same names held other
    values (its unchanged export moved the joints by the character's height). A rotation of a
    joint with one or two rotation channels is taken as the nearest turn to the clip's value (a
    file that writes angles past 180 degrees wrapped turned the joint by 360 degrees × the
    falloff), and a joint's three rotations as the triplet of its pose nearest the clip's.

    Raises
    ------
    SelectionError
        Other channels, another skeleton, or ``frame`` outside ``other``.
    """
    if other.channel_names != clip.channel_names:
        raise SelectionError(f"{source} has other channels than the motion")
    size = max(clip.height(), 1e-9)
    orients = [np.broadcast_to(np.eye(3), (c.n_nodes, 3, 3)) if c.orients is None
               else c.orients for c in (clip, other)]
    if not (np.allclose(other.offsets, clip.offsets, rtol=0.0, atol=1e-6 * size)
            and np.allclose(orients[0], orients[1], rtol=0.0, atol=1e-9)):
        raise SelectionError(
            f"{source} has the motion's channels on another skeleton (other joint offsets or "
            "joint orients: a BVH written from an FBX take folds the joint orients into its "
            "rotation channels), so its values are not an edit of the motion's; edit the take "
            "in its own format, or give the change as offsets")
    values = other.raw_channels[other.frame_index(frame)].copy()
    original = clip.channels[clip.frame_index(frame)]
    for columns in clip._rotation_index:  # (whole turns; a triplet may be the pose's flip)
        if len(columns):
            values[columns] = nearest_euler(values[None, columns], original[None, columns])[0]
    return values


def moved_channels(clip: Clip, channels: np.ndarray) -> np.ndarray:
    """(M,) int: the columns of ``channels`` (n_frames, C), a :func:`propagate` result, that
    differ from the clip's beyond rounding (1e-9 of its largest value): an edit by a whole
    turn goes through rotations and back and changes its channels by 1e-14 (the command
    line said it propagated, and the panel would have written a layer of that rounding)."""
    scale = max(1.0, float(np.abs(clip.channels).max(initial=0.0)))
    change = np.abs(channels - clip.channels).max(axis=0, initial=0.0)
    return np.flatnonzero(change > 1e-9 * scale)


def propagate(clip: Clip, edit: PoseEdit, weights: np.ndarray) -> np.ndarray:
    """Channels (n_frames, C) with the edit applied to every frame with its weight.

    Rotations: R_j' = exp(w_j · log ΔR) · R_j, converted back to the node's Euler order as the
    angles nearest the original's plus w_j times the edit's Euler angles
    (:func:`~sp_core.euler.nearest_euler`, :attr:`PoseEdit.turns`): the typed offsets at the
    edited frame, and curves that follow the original's through a near gimbal lock; the
    frames the falloff does not reach keep their values exactly. Translations (and partial
    rotations): v_j + w_j · Δv.
    """
    weights = np.asarray(weights, dtype=np.float64)
    if weights.shape != (clip.n_frames,) or not np.all(np.isfinite(weights)):
        raise SelectionError(f"the falloff must be {clip.n_frames} finite weights, one per frame "
                             f"of the motion, got shape {weights.shape}"
                             + ("" if weights.shape != (clip.n_frames,) else " with a NaN"))
    channels = clip.channels.copy()
    reached = weights != 0.0
    for node, delta in edit.rotations.items():
        columns = clip._rotation_index[node]
        order = clip.rotation_orders[node]
        turn = delta.as_rotvec()
        if not np.any(turn) or not reached.any():
            continue
        original = clip.channels[np.ix_(reached, columns)]
        current = Rotation.from_euler(order, original, degrees=True)
        moved = Rotation.from_rotvec(weights[reached, None] * turn[None, :]) * current
        # frame by frame, the angles nearest the original's with the edit's Euler angles
        # added by the weight: unwrapped from the first frame, the curves took the other
        # triplet past a near gimbal lock and kept it to the end, on frames of weight 0 too
        # (a 180-degree difference on every channel); nearest the original's alone, they
        # switched triplets where the edit took the joint past the lock
        angles = moved.as_euler(order, degrees=True)
        guide = original + weights[reached, None] * edit.turns.get(node, np.zeros(3))[None, :]
        channels[np.ix_(reached, columns)] = nearest_euler(angles, guide)
    for column, delta in edit.offsets.items():
        channels[:, column] += weights * delta
    return channels
