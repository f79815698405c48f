"""The panel's options between sessions: the JSON of ``options.to_dict()`` in QSettings.

Only fields that reach the panel are kept, and not those that belong to one scene (node names,
frames, K): the next scene may have other nodes and another length.
"""

from __future__ import annotations

import json

from PySide6 import QtCore

from sp_core.errors import OptionError
from sp_core.options import PANEL, Options, build, field_specs
from sp_core.session import Session

#: Options that belong to one scene: not carried to the next session.
SCENE_FIELDS = frozenset({"roots", "nodes", "weights", "leading", "frame_range", "pins",
                          "keys"})
KEY = "options"


def persisted(name: str) -> bool:
    """Whether option field ``name`` is saved between sessions."""
    return PANEL in field_specs()[name][1].fronts and name not in SCENE_FIELDS


def save_options(settings: QtCore.QSettings, options: Options) -> None:
    """Store the persisted fields of ``options`` as ``{group: {field: value}}`` JSON."""
    record = {group: {name: value for name, value in values.items() if persisted(name)}
              for group, values in options.to_dict().items()}
    settings.setValue(KEY, json.dumps({group: values for group, values in record.items()
                                       if values}))


def restore_options(settings: QtCore.QSettings, session: Session) -> None:
    """Give ``session`` the stored options, field by field (a value the schema now refuses,
    or a field that no longer exists, is skipped); one ``options_changed`` at most."""
    try:
        record = json.loads(str(settings.value(KEY) or "{}"))
    except json.JSONDecodeError:
        return
    specs = field_specs()
    options = session.options
    for group, values in record.items() if isinstance(record, dict) else ():
        for name, value in values.items() if isinstance(values, dict) else ():
            if name not in specs or specs[name][0] != group or not persisted(name):
                continue
            try:
                options = build({name: value}, base=options)
            except OptionError:
                continue
    if options != session.options:
        changed = {name: getattr(getattr(options, group), name)
                   for name, (group, _spec) in specs.items()
                   if getattr(getattr(options, group), name)
                   != getattr(getattr(session.options, group), name)}
        session.set_options(**changed)
