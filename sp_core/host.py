"""The Host protocol: what the session and the panel need from an application.

Every adapter (``StandaloneHost`` for BVH files, ``MayaHost``, ``MobuHost``, a ``FakeHost`` in
tests) implements :class:`Host`. Frames are host frame numbers; values are in the host's channel
units with rotations in degrees. Optional abilities (ghost poses, ...) are separate small
protocols checked with ``isinstance``.

Host writes go through :meth:`Host.undo_chunk` so that one Apply is one undo step, and through
:func:`host_step` so that an error says what was being done (which node, which channel).
"""

from __future__ import annotations

import importlib
import traceback
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass, field
from typing import Any, Protocol, TypeVar, runtime_checkable

import numpy as np

from sp_core.clip import Clip
from sp_core.curves import KeyedCurves
from sp_core.errors import SalientPosesError


class HostError(SalientPosesError, RuntimeError):
    """The application refused or failed an operation; the message says what was being done."""


@contextmanager
def host_step(what: str) -> Iterator[None]:
    """Wrap any failure inside the block as a :class:`HostError` starting with ``what``.

    ``SalientPosesError`` subclasses pass through unchanged (they already read well).
    """
    try:
        yield
    except SalientPosesError:
        raise
    except Exception as exc:  # noqa: BLE001 - host APIs raise anything; say what we were doing
        raise HostError(f"{what}: {type(exc).__name__}: {exc}") from exc


Layer = TypeVar("Layer")


@contextmanager
def muted(layers: Sequence[Layer], mute: Callable[[Layer, bool], None]) -> Iterator[None]:
    """``layers`` muted for the block (``mute(layer, True)``), then each one that was muted
    on again (``mute(layer, False)``), every one tried whatever another raises (the first
    failure is raised after): the hosts' reads of the motion under their own layers."""
    done: list[Layer] = []
    try:
        for layer in layers:
            mute(layer, True)
            done.append(layer)
        yield
    finally:
        failure: Exception | None = None
        for layer in done:
            try:
                mute(layer, False)
            except Exception as exc:  # noqa: BLE001 - the others first, then this one
                failure = failure or exc
        if failure is not None:
            raise failure


@dataclass(frozen=True)
class LayerHandle:
    """What a host returns for a layer it created, so the layer can be removed again.

    Attributes
    ----------
    name : str
        The layer's name in the host.
    kind : {"override", "additive"}
    token : object
        Host-specific identity (a node name, an object); opaque to the session.
    """

    name: str
    kind: str
    token: object = field(default=None, compare=False)


@runtime_checkable
class Host(Protocol):
    """What every application adapter implements."""

    @property
    def name(self) -> str:
        """Application name shown in the panel (``"Maya"``, ``"Standalone"``...)."""

    @property
    def fps(self) -> float:
        """Scene frame rate, frames per second."""

    def playback_range(self) -> tuple[int, int]:
        """First and last frame of the playback range (inclusive)."""

    def current_frame(self) -> int:
        """The frame the scene shows."""

    def set_current_frame(self, frame: int) -> None:
        """Show ``frame``."""

    def selected_nodes(self) -> list[str]:
        """Selected nodes, in selection order (may be empty)."""

    def hierarchy(self, roots: Sequence[str]) -> list[tuple[str, str | None]]:
        """(node, parent) for ``roots`` and every node under them, parents first."""

    def world_positions(self, nodes: Sequence[str], frames: Sequence[int]) -> np.ndarray:
        """(n_frames, n_nodes, 3) float64 world positions, scene units."""

    def animated_channels(self, nodes: Sequence[str]) -> list[str]:
        """``"<node>.<attribute>"`` of the animated, unlocked channels of ``nodes``."""

    def channel_values(self, channels: Sequence[str], first: int, last: int,
                       beneath: bool = False) -> np.ndarray:
        """(last - first + 1, n_channels) float64 dense values; rotations in degrees: what the
        scene shows, or with ``beneath`` what it shows under the reduction layers this tool
        wrote (as :meth:`motion` reads it)."""

    def motion(self, roots: Sequence[str], first: int, last: int) -> Clip:
        """The skeleton under ``roots`` with its animated channels over the range, as a clip
        starting at ``first`` (the engine's model for analysis, fitting and errors), without
        the reduction layers this tool wrote (an Analyze after Apply analyses the motion, not
        its reduction; a propagated edit, the artist's, is read)."""

    def write_curves(self, curves: KeyedCurves, layer: str,
                     replacing: Sequence[LayerHandle] = ()) -> LayerHandle:
        """Key ``curves`` into a new override layer named ``layer``; the original curves stay
        untouched. ``replacing``: layers of this tool that are removed after the write (in
        the same undo step): a host that keys what the scene shows outside the curves' range
        reads it without them."""

    def write_residual(self, channels: Sequence[str], frames: np.ndarray, residual: np.ndarray,
                       layer: str, weight: float, edit: bool = False) -> LayerHandle:
        """Key ``residual`` (n_frames, n_channels) on every frame into a new additive layer;
        ``edit``: an edit the artist propagated, which later reads of the motion include (a
        reduction's layers they leave out)."""

    def remove_layer(self, handle: LayerHandle) -> None:
        """Delete a layer this tool created; one no longer in the scene (an undo took it away,
        the user deleted it) is removed already: nothing happens."""

    def undo_chunk(self, label: str) -> AbstractContextManager[None]:
        """Everything inside is one undo step; on an exception the host rolls it back."""

    def preview_keyframes(self, frames: Sequence[int],
                          labels: Sequence[str] | None = None) -> None:
        """Show ``frames`` as keyframe markers (and ghost poses where the host can); with
        ``labels`` (``"keypose"``/``"breakdown"`` per frame) the two kinds look different."""

    def clear_preview(self) -> None:
        """Remove the preview."""


@runtime_checkable
class GhostPoses(Protocol):
    """Optional: a host that can draw ghosted poses at chosen frames."""

    def show_ghosts(self, frames: Sequence[int]) -> None:
        """Draw the poses at ``frames`` as ghosts (replacing earlier ghosts)."""


@runtime_checkable
class SparseLayers(Protocol):
    """Optional: a host that keys an additive layer with a few linear keys per channel (the
    corrective keys of :mod:`sp_core.corrective`). Every shipped host has it (standalone,
    Blender, Maya, MotionBuilder); a host without it gets those corrections on every frame of
    their span through :meth:`Host.write_residual`."""

    def write_sparse(self, keys: Mapping[str, tuple[np.ndarray, np.ndarray]], layer: str,
                     weight: float) -> LayerHandle:
        """Key each channel's (host frames, values) with linear interpolation (constant
        outside its keys) into a new additive layer named ``layer``."""


def sparse_keys(keys: Mapping[str, tuple[np.ndarray, np.ndarray]]
                ) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """The keys of :meth:`SparseLayers.write_sparse` checked and as float64 arrays.

    Parameters
    ----------
    keys : mapping of str to (frames, values)
        Channel → host frames (strictly increasing) and values (channel units), one value per
        frame, at least one key.

    Returns
    -------
    dict of str to ((n_keys,) float64, (n_keys,) float64)
        Same channels and order.
    """
    if not keys:
        raise HostError("writing sparse keys: no channel has keys")
    out = {}
    for channel, (frames, values) in keys.items():
        f = np.asarray(frames, dtype=np.float64).ravel()
        v = np.asarray(values, dtype=np.float64).ravel()
        if f.size == 0 or f.shape != v.shape:
            raise HostError(f"writing the keys of {channel}: {f.size} frames and {v.size} "
                            "values; give one value per frame and at least one key")
        if not (np.isfinite(f).all() and np.isfinite(v).all()) or np.any(np.diff(f) <= 0):
            raise HostError(f"writing the keys of {channel}: frames must be increasing and "
                            "frames and values finite")
        out[channel] = (f, v)
    return out


def ended_at_zero(frames: np.ndarray, values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """A residual's keys with a zero key one frame before and one after them.

    A host's curve holds its first and last keys' values outside them (Maya's and
    MotionBuilder's constant extrapolation): a residual that is not zero on the range's first
    or last frame would add that difference to the motion before or after an analysed part of
    the take; ended by zeros it is the residual on the range and nothing outside it.

    Parameters
    ----------
    frames : (n,) array
        Host frames of the residual, ascending.
    values : (n,) or (n, c) array
        The residual per frame (channel units).

    Returns
    -------
    frames : (n + 2,) float64
    values : (n + 2,) or (n + 2, c) float64
    """
    frames = np.asarray(frames, dtype=np.float64)
    values = np.asarray(values, dtype=np.float64)
    zero = np.zeros((1,) + values.shape[1:])
    return (np.concatenate([[frames[0] - 1.0], frames, [frames[-1] + 1.0]]),
            np.concatenate([zero, values, zero]))


@runtime_checkable
class SkipReport(Protocol):
    """Optional: a host that leaves some animated channels alone and says why."""

    skipped: dict[str, str]
    """Channel (host name) → reason, e.g. ``{"arm.rotateY": "locked"}``."""


@runtime_checkable
class HostNotes(Protocol):
    """Optional: a host with something to tell the user about its last write."""

    notes: list[str]
    """Sentences shown after Apply (e.g. how a residual had to be written)."""


#: Channels left alone for one reason that :func:`write_report` names one by one.
SKIPPED_LISTED = 6


def write_report(host: object) -> list[str]:
    """Sentences on a host's last write for the user: the channels it left alone and why
    (:class:`SkipReport`), then its notes (:class:`HostNotes`); empty for other hosts."""
    sentences = []
    if isinstance(host, SkipReport) and host.skipped:
        by_reason: dict[str, list[str]] = {}
        for plug, why in host.skipped.items():
            by_reason.setdefault(why, []).append(plug)
        parts = []
        for why, plugs in by_reason.items():
            if len(plugs) <= SKIPPED_LISTED:
                parts += [f"{plug} ({why})" for plug in plugs]
            else:  # dozens of channels (every bone of an FBX import): their nodes
                nodes = list(dict.fromkeys(plug.rpartition(".")[0] for plug in plugs))
                parts.append(f"{len(plugs)} channels of {', '.join(nodes)} ({why})")
        sentences.append("Left alone: " + ", ".join(parts) + ".")
    if isinstance(host, HostNotes):
        sentences += host.notes
    return sentences


class LazyModule:
    """A host SDK module (``maya.cmds``, ``pyfbsdk``) imported on first use, so that the
    adapters import outside their application; type checkers see the real module instead."""

    def __init__(self, name: str) -> None:
        self._name = name

    def __getattr__(self, attribute: str) -> Any:
        return getattr(importlib.import_module(self._name), attribute)


Check = Callable[[], "str | None"]


def corrected_reduction(session: Any, first: int, n_frames: int, n_keys: int, budget: str,
                        k: int) -> Any:
    """For the in-host self-tests: the session's reduction at ``n_keys`` evenly spaced keys of
    frames ``first`` .. ``first + n_frames - 1`` with a corrective ``budget`` (K given as ``k``,
    so no tolerance stops the corrective stage), or None if that stage found nothing to
    correct. ``session`` is a :class:`sp_core.session.Session` (a layer above this module)."""
    session.set_options(tangents="unified", residual_layer=False, corrective_budget=budget,
                        keys=k)
    even = np.linspace(first, first + n_frames - 1, n_keys).round().astype(int).tolist()
    reduction = session.reduce(frames=even)
    corrections = reduction.corrections
    return None if corrections is None or not corrections.keys else reduction


def in_parent_frame(points: np.ndarray, pose: np.ndarray) -> np.ndarray:
    """Where a limb's nodes are in its parent's frame, as a host reads a selected joint.

    Parameters
    ----------
    points : (..., n, 3) float64, scene units
        Positions in the space of ``pose`` (world or armature space).
    pose : (..., 4, 4) float64
        The parent's transform (column vectors: translation in ``[:3, 3]``). Its scale is left
        out, so that a scaled parent shows as a mismatch with the kinematics, as it does for a
        whole skeleton.

    Returns
    -------
    (..., n, 3) float64
    """
    turn = pose[..., :3, :3] / np.linalg.norm(pose[..., :3, :3], axis=-2, keepdims=True)
    return np.einsum("...ji,...nj->...ni", turn, points - pose[..., None, :3, 3])


def height_unread(reason: object) -> str:
    """A host's note when a limb's whole skeleton could not be read for its height."""
    return (f"the whole skeleton's height could not be read ({reason}): errors are scaled to "
            "the selection's own height, so their millimetres are larger than the body's")


#: The limb the in-host self-tests read and reduce alone (a joint of the sample's skeleton).
SELF_TEST_LIMB = "RightShoulder"


def replace_check(session: Any, host: Host, nodes: Sequence[str], first: int, n_frames: int,
                  keys: int, tolerance: float) -> str | None:
    """For the in-host self-tests: Apply over the take's second quarter (the fewest keys),
    then Analyze from the middle of that quarter to the end of the third and Apply replacing
    the first layers. The second analysis reads the original motion (not the first
    reduction, which covers its first frames: the tool's own layers are out of the read);
    outside its frames the original plays, on the first half of the second quarter too,
    where the replaced layer played its reduction (MotionBuilder's layer keys what the scene
    shows outside its range, read without the layers it replaces); the layers are removed
    again. None, or what went wrong (``tolerance`` in scene units). ``session`` is a
    :class:`sp_core.session.Session` over the whole skeleton ``nodes``, analysed at ``keys``
    keys; the take has at least 16 frames."""
    if n_frames < 16:
        return f"{n_frames} frames: the check needs 16 (four quarters of two frames and more)"
    frames = list(range(first, first + n_frames))
    before = host.world_positions(list(nodes), frames)
    quarter = n_frames // 4
    session.set_options(frame_range=(first + quarter, first + 2 * quarter - 1),
                        space="channel", residual_layer=False)
    session.analyze()
    session.set_k(session.space.min_keys)  # (coarse: a read of it is far from the motion)
    session.apply()
    later = (first + quarter + quarter // 2, first + 3 * quarter - 1)
    try:
        session.set_options(frame_range=later)
        session.analyze()
        motion = session.motion
        order = [list(nodes).index(n) for n in motion.node_names]
        rows = [f - first for f in motion.frames]
        read = float(np.linalg.norm(motion.positions - before[rows][:, order], axis=-1).max())
        session.set_k(min(keys, session.space.max_keys))
        session.apply(replace=True)
        shown = host.world_positions(list(nodes), frames)
    except BaseException:
        try:  # (the layers away, and the failure said, not a failure of the removal)
            session.remove()
        except Exception:  # noqa: BLE001, S110 - the first failure is the one to report
            pass
        raise
    session.remove()
    if read > tolerance:
        return f"the analysis after Apply read the reduction: {read:.4g} units off the motion"
    outside = [i for i, f in enumerate(frames) if not later[0] <= f <= later[1]]
    moved = float(np.linalg.norm(shown[outside] - before[outside], axis=-1).max())
    if moved > tolerance:
        return f"after the replacing Apply the joints outside its frames moved by {moved:.4g}"
    return None


def limb_check(session: Any, host: Host, nodes: Sequence[str], first: int, n_frames: int,
               tolerance: float) -> str | None:
    """For the in-host self-tests: ``session`` (options ``roots=[SELF_TEST_LIMB]``) reads the
    limb as the scene shows it in its parent's frame (the same distances between its nodes on
    every frame), and Apply at 4 keys (a change any clip shows) moves nothing outside it among
    ``nodes`` (the whole skeleton); the layers are removed again. None, or what went wrong
    (``tolerance`` in scene units). ``session`` is a :class:`sp_core.session.Session`."""
    frames = list(range(first, first + n_frames))
    before = host.world_positions(list(nodes), frames)
    session.analyze()
    motion = session.motion
    shown = host.world_positions(motion.node_names, frames)

    def spans(points: np.ndarray) -> np.ndarray:
        return np.linalg.norm(points[:, :, None] - points[:, None], axis=-1)

    off = float(np.abs(spans(motion.positions) - spans(shown)).max())
    if off > tolerance:
        return f"the limb read differs from the scene by {off:.4g} units"
    if motion.root_names != [SELF_TEST_LIMB]:
        return f"read {', '.join(motion.root_names)} as the limb's top, not {SELF_TEST_LIMB}"
    session.set_k(4)
    session.set_options(space="channel", residual_layer=False)
    session.apply()
    try:
        after = host.world_positions(list(nodes), frames)
    finally:
        session.remove()
    inside = set(motion.node_names)
    outside = [i for i, n in enumerate(nodes) if n not in inside]
    moved = np.linalg.norm(after - before, axis=-1)
    if moved[:, outside].max() > tolerance:
        worst = outside[int(np.argmax(moved[:, outside].max(axis=0)))]
        return f"Apply on the limb moved {nodes[worst]} by {moved[:, outside].max():.4g} units"
    limb = [i for i, n in enumerate(nodes) if n in inside]
    return None if moved[:, limb].max() > tolerance else "Apply did not change the limb"


def run_self_test(steps: Sequence[tuple[str, Check]], report: Callable[[str], None],
                  essential: int) -> bool:
    """Run an in-host self-test: each check returns None (pass) or what went wrong.

    Prints ``PASS``/``FAIL`` per step and a final verdict; stops after a failing step among
    the first ``essential`` (the later steps need them). Exceptions are failures, not crashes.
    """
    results: list[bool] = []
    for number, (name, check) in enumerate(steps):
        try:
            problem = check()
        except Exception:  # noqa: BLE001 - a self-test reports, it does not stop
            problem = traceback.format_exc(limit=3).strip().splitlines()[-1]
        results.append(problem is None)
        report(f"{'PASS' if problem is None else 'FAIL'}  {name}"
               + (f": {problem}" if problem else ""))
        if problem is not None and number < essential:
            break
    passed = all(results) and len(results) == len(steps)
    report("Salient Poses self-test: " + ("PASS" if passed else "FAIL"))
    return passed
