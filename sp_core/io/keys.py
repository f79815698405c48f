"""A reduction as JSON (schema in docs/formats.md) and as a dense BVH."""

from __future__ import annotations

import os
from typing import Any

import numpy as np

from sp_core.clip import Clip
from sp_core.io.bvh import write_bvh
from sp_core.reduction import Reduction


def reduction_record(reduction: Reduction, source: str, fps: float) -> dict[str, Any]:
    """JSON-ready record of a reduction.

    Each animated channel lists its keys as ``[frame, value, in_dframe, in_dvalue, out_dframe,
    out_dvalue]``: host frame, value in channel units (degrees for rotations), and the in / out
    Bézier handles as offsets from the key (in points back: in_dframe <= 0). Constant channels
    have ``"animated": false``, no keys and their ``"value"``. ``"labels"`` is the list of
    ``"keypose"``/``"breakdown"`` per frame for layered selections, else null.
    """
    curves = reduction.curves
    channels = []
    for c, name in enumerate(curves.channel_names):
        entry: dict[str, Any] = {"name": name, "animated": bool(curves.animated[c])}
        if curves.animated[c]:
            rows = np.column_stack([curves.frames, curves.values[:, c], curves.in_handles[:, c],
                                    curves.out_handles[:, c]])
            entry["keys"] = [[int(r[0])] + [float(x) for x in r[1:]] for r in rows]
        else:
            entry["keys"] = []
            entry["value"] = float(curves.values[0, c])
        channels.append(entry)
    record = {
        "clip": source,
        "fps": fps,
        "frames": curves.frames.tolist(),
        "labels": curves.labels,
        "tangents": reduction.tangents,
        "space": reduction.space,
        "weighted": curves.weighted,
        "channels": channels,
        "metrics": reduction.metrics.record(),
        "timings": {k: round(v, 6) for k, v in reduction.timings.items()},
        "notes": list(reduction.notes),
    }
    if reduction.corrections is not None:
        # the additive corrective layer: linear keys per channel, zero outside them
        record["corrective"] = {"interpolation": "linear",
                                "channels": reduction.corrections.record()}
        assert reduction.pose_metrics is not None
        record["pose_metrics"] = reduction.pose_metrics.record()
    return record


def reduced_clip(clip: Clip, reduction: Reduction) -> Clip:
    """The clip over the reduced range with the reduced values (corrections included) on
    every frame."""
    part = clip.sub_range(int(reduction.frames[0]), int(reduction.frames[-1]))
    return part.with_channels(reduction.corrected)


def write_reduced_bvh(clip: Clip, reduction: Reduction, path: str | os.PathLike[str]) -> None:
    """Write the reduced animation sampled on every frame (viewable in any BVH viewer)."""
    write_bvh(reduced_clip(clip, reduction), path)
