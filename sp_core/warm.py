"""Compile every numba kernel once and leave it in numba's cache, and the engine's Python
modules to bytecode (``install.py`` runs this).

numba compiles a ``cache=True`` kernel on its first call and stores the machine code next to
the module; later processes load it instead of compiling (about 3 s for all kernels). Calling
the kernels here, through the same public paths a real analysis and reduction take, makes the
types match, so the first ``salient-poses analyze`` after installing already finds them.

The bytecode matters where Python writes none itself: an editable install leaves ``sp_core``'s
modules uncompiled, and with ``PYTHONDONTWRITEBYTECODE`` set (containers and CI often set it)
every process compiled them again (0.2-0.25 s of a fresh ``salient-poses analyze`` on a
two-core machine).

Usage: ``python -m sp_core.warm``
"""

from __future__ import annotations

import compileall
import os
import time

import numpy as np

from sp_core import _kernels
from sp_core.clip import Clip
from sp_core.curves import KERNEL_SIZE, solve_parameter
from sp_core.reduction import reduce
from sp_core.selection import SelectionSpace

COSTS = ("line-max", "line-time", "line-sse", "curve-max")


def practice_clip(n_frames: int = 40) -> Clip:
    """A small moving chain (root translation and rotation, two turning joints, a tip)."""
    t = np.linspace(0.0, 1.0, n_frames)[:, None]
    channels = np.hstack([np.sin(3 * t), 0.2 * t, np.cos(2 * t),  # root position
                          40 * np.sin(4 * t), 10 * t, 5 * np.cos(t),  # root Z Y X
                          30 * np.sin(5 * t), 20 * t, 60 * np.sin(2 * t)])
    names = ["root.Xposition", "root.Yposition", "root.Zposition", "root.Zrotation",
             "root.Yrotation", "root.Xrotation", "arm.Zrotation", "arm.Xrotation",
             "hand.Yrotation"]
    return Clip(["root", "arm", "hand", "tip"], [-1, 0, 1, 2],
                [[0, 0, 0], [0, 1, 0], [0, 1, 0], [0, 0.5, 0]], [False, False, False, True],
                names, channels, 30.0, name="warm-up")


def warm() -> float:
    """Run every kernel once; returns the seconds it took (mostly compilation when cold)."""
    started = time.perf_counter()
    clip = practice_clip()
    for cost in COSTS:
        for compose in ("max", "sum"):
            SelectionSpace.from_clip(clip, cost=cost, compose=compose)
    warm_selection()
    for tangents in ("unified", "broken"):  # broken solves by segment (its own kernel)
        reduce(clip, [0, 13, 27, clip.n_frames - 1], tangents, space="world")
    # the corrective stage's subtree kernels
    reduce(clip, [0, clip.n_frames - 1], "unified", space="world", corrective_budget="50%")
    # the Bezier parameter kernel runs only on large arrays (weighted fits of long takes),
    # and so do the channel fit's segment sums (frames x channels from KERNEL_SIZE: the
    # sample's 96 channels from 521 frames on)
    size = KERNEL_SIZE
    solve_parameter(np.full(size, 0.5), np.full(size, 0.3), np.full(size, 0.2),
                    np.ones(size))
    from sp_core._fit_kernels import segment_normal_sums, tridiagonal_rows

    weights = np.ones((4, 2))
    segment_normal_sums(weights, weights, weights, np.array([0, 2], dtype=np.int64), True)
    # and their scalar tridiagonal systems (from sp_core.blocks.KERNEL_UNKNOWNS)
    tridiagonal_rows(np.full((2, 3), 4.0), np.ones((2, 2)), np.ones((2, 3)))
    return time.perf_counter() - started


def warm_selection() -> None:
    """The DP kernels with every back-pointer width (uint8 up to a band of 255 candidates,
    uint16 up to 65,535, int32 beyond): the practice clip alone reaches only uint8."""
    m, band = 40, 3
    table = np.full((m, band + 1), 1.0)
    table[:, 0] = 0.0
    lowest = np.maximum(np.arange(m) - band, 0).astype(np.int64)
    for dtype in (np.uint8, np.uint16, np.int32):
        rows = np.full((2, m), np.inf)
        rows[1, 0] = 0.0
        final = np.full(m + 1, np.inf)
        back = np.zeros((m + 1, m), dtype=dtype)
        for use_sum in (False, True):
            _kernels.select_rows(table, _kernels.block_floors(table), lowest, 2, 6, use_sum, 4,
                                 2, 100, rows, final, back, np.zeros(5, dtype=np.int64),
                                 np.zeros(5, dtype=np.int64))
            # and its tiled form for long takes
            _kernels.select_tiles(table, _kernels.block_floors(table), lowest, 2, 6, use_sum,
                                  8, 2, 100, rows, final, back, np.full(5, 1, dtype=np.int64),
                                  np.zeros(5, dtype=np.int64), np.zeros(5, dtype=np.int64))


def compile_bytecode(package: str | None = None) -> bool:
    """Write the bytecode of every module of a package folder, next to its sources.

    Parameters
    ----------
    package : str, optional
        The folder; by default the installed ``sp_core``'s.

    Returns
    -------
    bool
        True if every module compiled and was written (False, for instance, where the
        install's folders are not writable: Python then compiles in memory as before).
    """
    package = package or os.path.dirname(os.path.abspath(__file__))
    # a stale file is found by its timestamp, as Python's own are: editing a module after
    # installing costs only that module's compilation
    return bool(compileall.compile_dir(package, quiet=1))


def main() -> None:
    print(f"numba kernels compiled and cached in {warm():.1f} s")
    if not compile_bytecode():
        print("some of sp_core's modules were not compiled to bytecode (see above); "
              "Python compiles them on each start instead")


if __name__ == "__main__":
    main()
