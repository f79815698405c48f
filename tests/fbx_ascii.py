"""Write small ASCII FBX 7.4 files for tests: joints with any rotation order, pre/post rotations,
animated translation and rotation keyed on every frame, several takes.

Blender's exporter writes none of these FBX features (it bakes everything into XYZ ``Lcl``
values), so the reader's handling of them is checked on files made here, against ufbx's own
evaluation of the same files. The layout follows the FBX 7.4 ASCII format: ``Objects`` (models,
their ``LimbNode`` attributes, stacks, layers, curve nodes, curves) and ``Connections``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

KTIME_PER_SECOND = 46186158000
ORDERS = ("XYZ", "XZY", "YZX", "YXZ", "ZXY", "ZYX")


@dataclass
class Joint:
    """One joint: static transform properties and, per take, keyed values on every frame."""

    name: str
    parent: str | None
    translation: tuple[float, float, float]
    order: str = "XYZ"
    pre: tuple[float, float, float] = (0.0, 0.0, 0.0)
    post: tuple[float, float, float] = (0.0, 0.0, 0.0)
    rotation: tuple[float, float, float] = (0.0, 0.0, 0.0)
    scale: tuple[float, float, float] = (1.0, 1.0, 1.0)
    #: take name -> (n_frames, 3) degrees, X Y Z
    rotation_keys: dict[str, np.ndarray] = field(default_factory=dict)
    #: take name -> (n_frames, 3) translations
    translation_keys: dict[str, np.ndarray] = field(default_factory=dict)


def _floats(values) -> str:
    return ",".join(f"{float(v):.17g}" for v in values)


def write_fbx(path: Path, joints: list[Joint], takes: list[str], fps: float = 30.0,
              n_frames: int = 10, unit_cm: float = 1.0, up_axis: int = 1,
              start_frame: int = 0) -> Path:
    """Write the joints and their takes; frame ``f`` of every take is at
    ``(start_frame + f) / fps`` seconds."""
    ids = iter(range(1000, 10**6))
    lines = ["; FBX 7.4.0 project file", "FBXHeaderExtension:  {", "\tFBXHeaderVersion: 1003",
             "\tFBXVersion: 7400", "}", "GlobalSettings:  {", "\tVersion: 1000",
             "\tProperties70:  {",
             f'\t\tP: "UpAxis", "int", "Integer", "",{up_axis}',
             '\t\tP: "UpAxisSign", "int", "Integer", "",1',
             f'\t\tP: "FrontAxis", "int", "Integer", "",{2 if up_axis == 1 else 1}',
             f'\t\tP: "FrontAxisSign", "int", "Integer", "",{1 if up_axis == 1 else -1}',
             '\t\tP: "CoordAxis", "int", "Integer", "",0',
             '\t\tP: "CoordAxisSign", "int", "Integer", "",1',
             f'\t\tP: "UnitScaleFactor", "double", "Number", "",{unit_cm:.17g}',
             '\t\tP: "TimeMode", "enum", "", "",14',
             f'\t\tP: "CustomFrameRate", "double", "Number", "",{fps:.17g}',
             "\t}", "}", "Objects:  {"]
    connections: list[str] = []
    model = {}
    for joint in joints:
        attribute, node = next(ids), next(ids)
        model[joint.name] = node
        lines += [f'\tNodeAttribute: {attribute}, "NodeAttribute::{joint.name}", "LimbNode" {{',
                  '\t\tTypeFlags: "Skeleton"', "\t}",
                  f'\tModel: {node}, "Model::{joint.name}", "LimbNode" {{', "\t\tVersion: 232",
                  "\t\tProperties70:  {",
                  f'\t\t\tP: "RotationOrder", "enum", "", "",{ORDERS.index(joint.order)}',
                  '\t\t\tP: "RotationActive", "bool", "", "",1',
                  f'\t\t\tP: "PreRotation", "Vector3D", "Vector", "",{_floats(joint.pre)}',
                  f'\t\t\tP: "PostRotation", "Vector3D", "Vector", "",{_floats(joint.post)}',
                  f'\t\t\tP: "Lcl Translation", "Lcl Translation", "", "A",'
                  f"{_floats(joint.translation)}",
                  f'\t\t\tP: "Lcl Rotation", "Lcl Rotation", "", "A",{_floats(joint.rotation)}',
                  f'\t\t\tP: "Lcl Scaling", "Lcl Scaling", "", "A",{_floats(joint.scale)}',
                  "\t\t}", "\t}"]
        connections.append(f'\tC: "OO",{attribute},{node}')
        parent = 0 if joint.parent is None else model[joint.parent]
        connections.append(f'\tC: "OO",{node},{parent}')
    times = [round((start_frame + f) * KTIME_PER_SECOND / fps) for f in range(n_frames)]
    for take in takes:
        stack, layer = next(ids), next(ids)
        lines += [f'\tAnimationStack: {stack}, "AnimStack::{take}", "" {{', "\t\tProperties70:  {",
                  f'\t\t\tP: "LocalStart", "KTime", "Time", "",{times[0]}',
                  f'\t\t\tP: "LocalStop", "KTime", "Time", "",{times[-1]}',
                  "\t\t}", "\t}",
                  f'\tAnimationLayer: {layer}, "AnimLayer::{take}", "" {{', "\t}"]
        connections.append(f'\tC: "OO",{layer},{stack}')
        for joint in joints:
            for prop, keys in (("Lcl Rotation", joint.rotation_keys.get(take)),
                               ("Lcl Translation", joint.translation_keys.get(take))):
                if keys is None:
                    continue
                curve_node = next(ids)
                short = "R" if prop == "Lcl Rotation" else "T"
                lines += [f'\tAnimationCurveNode: {curve_node}, "AnimCurveNode::{short}", "" {{',
                          "\t\tProperties70:  {"]
                lines += [f'\t\t\tP: "d|{axis}", "Number", "", "A",{keys[0, k]:.17g}'
                          for k, axis in enumerate("XYZ")]
                lines += ["\t\t}", "\t}"]
                connections.append(f'\tC: "OO",{curve_node},{layer}')
                connections.append(f'\tC: "OP",{curve_node},{model[joint.name]}, "{prop}"')
                for k, axis in enumerate("XYZ"):
                    curve = next(ids)
                    lines += [f'\tAnimationCurve: {curve}, "AnimCurve::", "" {{',
                              f"\t\tDefault: {keys[0, k]:.17g}", "\t\tKeyVer: 4008",
                              f"\t\tKeyTime: *{n_frames} {{", f"\t\t\ta: {_floats(times)}",
                              "\t\t}",
                              f"\t\tKeyValueFloat: *{n_frames} {{",
                              f"\t\t\ta: {_floats(keys[:, k])}", "\t\t}",
                              "\t\tKeyAttrFlags: *1 {", "\t\t\ta: 4", "\t\t}",
                              "\t\tKeyAttrDataFloat: *4 {", "\t\t\ta: 0,0,0,0", "\t\t}",
                              "\t\tKeyAttrRefCount: *1 {", f"\t\t\ta: {n_frames}", "\t\t}",
                              "\t}"]
                    connections.append(f'\tC: "OP",{curve},{curve_node}, "d|{axis}"')
    lines += ["}", "Connections:  {", *connections, "}", ""]
    path.write_text("\n".join(lines), encoding="utf-8")
    return path
