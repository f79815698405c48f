"""The panel's options between sessions: the JSON of ``options.to_dict()`` in QSettings.

Only fields that reach the panel are kept, and not those that belong to one scene (node names,
frames, K): the next scene may have other nodes and another length.
"""

from __future__ import annotations

import json
from typing import Any

from PySide6 import QtCore

from sp_core.errors import OptionError
from sp_core.options import PANEL, Options, build, field_specs
from sp_core.session import Session

#: Options that belong to one scene: not carried to the next session. Keyposes mode and its
#: breakdowns go with its leading nodes (restored without them, every Analyze was refused).
SCENE_FIELDS = frozenset({"roots", "nodes", "weights", "leading", "layered", "breakdowns",
                          "frame_range", "pins", "keys"})
KEY = "options"


def panel_settings() -> QtCore.QSettings:
    """Where the panel keeps its options (and the hosts' "last settings" read them)."""
    return QtCore.QSettings("SalientPoses", "panel")


def persisted(name: str) -> bool:
    """Whether option field ``name`` is saved between sessions."""
    return PANEL in field_specs()[name][1].fronts and name not in SCENE_FIELDS


def save_options(settings: QtCore.QSettings, options: Options) -> None:
    """Store the persisted fields of ``options`` as ``{group: {field: value}}`` JSON."""
    record = {group: {name: value for name, value in values.items() if persisted(name)}
              for group, values in options.to_dict().items()}
    settings.setValue(KEY, json.dumps({group: values for group, values in record.items()
                                       if values}))


def stored_options(settings: QtCore.QSettings, base: Options | None = None) -> Options:
    """``base`` (default: the defaults) with the options stored in ``settings``, field by field
    (a value the schema now refuses, or a field that no longer exists, is skipped)."""
    options = base or Options()
    try:
        record = json.loads(str(settings.value(KEY) or "{}"))
    except json.JSONDecodeError:
        return options
    specs = field_specs()
    stored = {name: value
              for group, values in (record.items() if isinstance(record, dict) else ())
              for name, value in (values.items() if isinstance(values, dict) else ())
              if name in specs and specs[name][0] == group and persisted(name)}
    try:  # together: one choice of K (a ratio) must not be undone by the next (the tolerance)
        return build(stored, base=options)
    except OptionError:
        pass
    for name, value in stored.items():  # else the fields the schema still takes
        try:
            options = build({name: value}, base=options)
        except OptionError:
            continue
    return options


def changed_fields(options: Options, base: Options) -> dict[str, Any]:
    """``{field: value}`` of the fields where ``options`` differs from ``base``."""
    return {name: getattr(getattr(options, group), name)
            for name, (group, _spec) in field_specs().items()
            if getattr(getattr(options, group), name) != getattr(getattr(base, group), name)}


def restore_options(settings: QtCore.QSettings, session: Session) -> None:
    """Give ``session`` the stored options (:func:`stored_options`); one ``options_changed`` at
    most."""
    options = stored_options(settings, session.options)
    if options != session.options:
        session.set_options(**changed_fields(options, session.options))
