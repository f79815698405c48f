"""The Apply box: how curves are fitted through the keys and which layers Apply writes.

Binds the fields of :class:`sp_core.options.FitOptions` and
:class:`sp_core.options.LayerOptions`, and says in one line what Apply will write.
"""

from __future__ import annotations

from PySide6 import QtWidgets

from sp_core.options import Options
from sp_core.ui.analysis_box import form_layout
from sp_core.ui.bindings import Binder

#: What Apply does, said on its button (a panel says instead why there is nothing to write).
APPLY_TIP = ("write the keys into a new layer (Ctrl+Return); one undo step, the original "
             "animation stays")


def apply_summary(options: Options, keys: int | None, replacing: bool,
                  plan: tuple[str | None, float | None]) -> str:
    """What Apply will write, in one line: ``keys`` keys (None: not known yet) and the
    corrective ``plan`` (budget, max error in mm at which it stops; see
    :meth:`sp_core.session.Session.corrective_plan`); ``replacing``: layers were written
    before (Apply asks whether it replaces them)."""
    fit, layer = options.fit, options.layer
    count = "the keys" if keys is None else f"{keys} keys"
    text = (f"Apply writes {count} on every animated channel into a new override layer "
            f"'{layer.layer}' ({fit.tangents} tangents, {fit.space} fit)")
    budget, stop = plan
    if budget not in (None, "0", "0%"):
        until = f" (until the max error is within {stop:g} mm)" if stop is not None else ""
        text += (f", up to {budget} corrective keys{until} into additive layer "
                 f"'{layer.layer}_corrective'")
    if layer.residual_layer:
        text += (f" and the residual into additive layer '{layer.layer}_residual' at weight "
                 f"{layer.residual_weight:g}")
    if replacing:
        text += "; it asks first whether they replace the layers written before"
    return text + "; the original animation is not touched."


class ApplyBox(QtWidgets.QGroupBox):
    """Fit and layer options, the summary, Apply and Remove."""

    def __init__(self, binder: Binder, parent: QtWidgets.QWidget | None = None) -> None:
        super().__init__("Apply", parent)
        self.binder = binder
        # the form holds the fields; the wrapped summary and the buttons go under it in a box
        # layout, which gives a wrapped label its height for the box's width as a minimum (a
        # form row spanning the form gets only its one-line height when space is short)
        column = QtWidgets.QVBoxLayout(self)
        fields = QtWidgets.QWidget()
        form = form_layout(fields)
        form.setContentsMargins(0, 0, 0, 0)
        column.addWidget(fields)
        form.addRow("tangents", binder.generate("tangents"))
        self.smooth_spin = binder.generate("smoothness")
        form.addRow("smoothness", self.smooth_spin)
        space = binder.generate("space")
        form.addRow("fit in", space)
        form.addRow("world iterations", binder.generate("world_iterations"))
        form.addRow("world fit minimises", binder.generate("objective"))
        form.addRow("key values", binder.generate("key_values"))
        form.addRow("corrective keys", binder.generate("corrective_budget"))
        self.layer_edit = binder.generate("layer")
        form.addRow("layer", self.layer_edit)
        self.residual_box = binder.generate("residual_layer")
        self.residual_box.setText("also write the residual, weight")
        self.residual_spin = binder.generate("residual_weight")
        row = QtWidgets.QHBoxLayout()
        row.addWidget(self.residual_box)
        row.addWidget(self.residual_spin)
        form.addRow(row)
        self.summary = QtWidgets.QLabel("")
        self.summary.setObjectName("applySummary")
        self.summary.setWordWrap(True)
        column.addWidget(self.summary)
        self.apply_button = QtWidgets.QPushButton("Apply")
        self.apply_button.setToolTip(APPLY_TIP)
        self.remove_button = QtWidgets.QPushButton("Remove")
        self.remove_button.setToolTip("delete the layers Apply created (one undo step)")
        buttons = QtWidgets.QHBoxLayout()
        buttons.addStretch(1)
        buttons.addWidget(self.remove_button)
        buttons.addWidget(self.apply_button)
        column.addLayout(buttons)
