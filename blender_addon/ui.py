"""The Salient Poses sidebar panel of the Graph Editor and the Dope Sheet, and its operators.

The panel's settings are generated from the options schema (:mod:`sp_core.options`): every
option that reaches the panel becomes a Blender property with the schema's help and default: a
number, switch or choice with its bounds as a typed property, anything else (an option that may
be automatic, a list of frames or nodes, a range, a tolerance, a key budget) as text in the
command line's syntax, empty for its default; nothing is declared here. K itself is the
panel's own K property (with the Suggested K button).
The panel holds one :class:`sp_core.session.Session` over a :class:`BlenderHost`.

The error graph of the Qt panel is not drawn natively: the panel shows, as text, the error of
the reduction at the current K (mean and max joint error in mm for the character scaled to
1.7 m) and the suggested K values; the keyframes of the current K are timeline markers.
"""

from __future__ import annotations

import textwrap
import traceback
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from blender_addon.host import BlenderHost
from sp_core.errors import SalientPosesError, said
from sp_core.host import LazyModule, write_report
from sp_core.options import GROUPS, PANEL, Options, Spec, build, field_specs, words_of
from sp_core.session import Session

bpy: Any = LazyModule("bpy")

#: Option groups the panel shows, in order, with their heading.
SECTIONS = {"analysis": "Analysis", "keys": "Keys", "fit": "Fit", "layer": "Layer"}
#: Schema kinds held by a typed Blender property (when the option cannot be automatic, None).
TYPED = ("int", "float", "bool", "choice")
#: Options the panel does not show as a setting: the hierarchy is the active armature, K and
#: the suggested K are the panel's K property and button, a cost's options are a mapping.
NOT_SHOWN = ("roots", "keys", "suggested", "cost_options")
CATEGORY = "Salient Poses"
#: Pixels an average character of Blender's interface font takes at UI scale 1 (the sidebar's
#: labels are wrapped to its width with it).
CHARACTER_PIXELS = 6.5
#: Steps of the cursor's progress during Analyze.
PROGRESS_STEPS = 1000


def panel_fields() -> dict[str, tuple[str, Spec]]:
    """The options the panel shows: every one reaching the panel in :data:`SECTIONS`, but
    :data:`NOT_SHOWN`."""
    return {name: (group, spec) for name, (group, spec) in field_specs().items()
            if PANEL in spec.fronts and group in SECTIONS and name not in NOT_SHOWN}


def typed(spec: Spec) -> bool:
    """Whether an option is a typed Blender property (else text, empty for its default)."""
    return spec.kind in TYPED and not spec.nullable


def _default(name: str, group: str) -> Any:
    value = getattr(GROUPS[group](), name)
    if isinstance(value, tuple):  # as typed on the command line: 2,20 for a tolerance
        return ",".join(f"{v:g}" if isinstance(v, float) else str(v) for v in value)
    return "" if value is None else value


def label_of(name: str) -> str:
    """How the sidebar names option ``name``: its property's label ("Max span")."""
    return words_of(name).capitalize()


def blender_property(name: str, group: str, spec: Spec) -> Any:
    """The Blender property of one option, from its declaration."""
    props = bpy.props
    common: dict[str, Any] = {"name": label_of(name), "description": spec.help}
    default = _default(name, group)
    bounds: dict[str, Any] = {}
    if spec.low is not None and not spec.low_open:
        bounds["min"] = spec.low
    if spec.high is not None and not spec.high_open:
        bounds["max"] = spec.high
    if not typed(spec):
        return props.StringProperty(default=str(default), **common)
    if spec.kind == "int":
        return props.IntProperty(default=default, **common,
                                 **{k: int(v) for k, v in bounds.items()})
    if spec.kind == "float":
        return props.FloatProperty(default=default, **common, **bounds)
    if spec.kind == "bool":
        return props.BoolProperty(default=default, **common)
    items = [(c, c, spec.help) for c in spec.allowed()]
    return props.EnumProperty(items=items, default=default, **common)


def options_from(settings: Any) -> Options:
    """Checked options from the panel's settings (an empty text means the option's default);
    a refused value is named by its label."""
    values: dict[str, Any] = {}
    for name, (_group, spec) in panel_fields().items():
        value = getattr(settings, name)
        if not typed(spec) and value.strip() == "":
            continue
        values[name] = value
    return build(values, labels={name: label_of(name) for name in values})


@dataclass
class PanelState:
    """What the panel shows between redraws (one per Blender session)."""

    session: Session | None = None
    message: str = ""
    readout: str = ""
    suggestions: str = ""
    notes: list[str] = field(default_factory=list)


STATE = PanelState()


def _fail(operator: Any, error: Exception) -> set[str]:
    if isinstance(error, SalientPosesError):
        STATE.message = said(error, label_of)  # the options it names, as the sidebar labels
    else:  # a fault of this tool's, not the user's input: its traceback for a bug report
        traceback.print_exception(error)
        STATE.message = (f"Salient Poses failed ({type(error).__name__}: {error}); nothing "
                         "it wrote is kept, and the details are in the system console "
                         "(Window > Toggle System Console) for a bug report")
    operator.report({"ERROR"}, STATE.message)
    return {"CANCELLED"}


def measure(session: Session) -> str:
    """The reduction's error at the current K in mm (character scaled to 1.7 m)."""
    metrics = session.reduce().metrics
    keys = session.keys_said(metrics.corrective_keys)
    return (f"K = {session.k}: {metrics.said()} ({metrics.worst_node} at frame "
            f"{metrics.worst_frame}{', ' + keys if keys else ''})")


def _k_changed(settings: Any, _context: Any) -> None:
    session = STATE.session
    if session is None or session.space is None or settings.k == session.k:
        return
    try:
        session.set_k(settings.k)
        STATE.readout = measure(session)
        STATE.message = ""
    except SalientPosesError as exc:
        STATE.message = said(exc, label_of)
        settings.k = session.k  # the field shows the K in use (this update then returns)


def reset() -> None:
    """Forget the session and what the panel shows of it (a failed Analyze, another file)."""
    STATE.session = None
    STATE.readout = STATE.suggestions = ""
    STATE.notes = []


def _undone(*_args: Any) -> None:
    # an undo or redo takes back or brings back what the last message says was done
    STATE.message = ""


def _file_loaded(*_args: Any) -> None:
    # a new or opened file: the session's armature and analysis belong to the file before
    # (Apply wrote the previous file's motion onto this one's character)
    reset()
    STATE.message = ""


def analyze(context: Any) -> Session:
    """Analyse the active armature with the panel's options; preview the chosen K.

    The session keeps that armature: Apply writes onto the armature analysed, whichever is
    active then (it wrote one character's motion onto another that had been clicked since).
    """
    settings = context.scene.salient_poses
    reset()
    host = BlenderHost()
    host.armature = host.object().name
    session = Session(host, options_from(settings))
    # the mouse cursor shows how far it is (the search for the tolerance's K took 8 s on the
    # sample in Blender, with nothing moving on screen)
    manager = context.window_manager
    manager.progress_begin(0, PROGRESS_STEPS)
    try:
        session.analyze(graph=True,  # (the sidebar's K browses the whole space)
                        progress=lambda f, _m: manager.progress_update(int(f * PROGRESS_STEPS)))
    finally:
        manager.progress_end()
    session.set_k()
    STATE.session = session
    suggestions = session.suggestions
    cliffs = ", ".join(str(k) for k in suggestions["cliffs"]) or "none"
    STATE.suggestions = f"Suggested K {suggestions['threshold']} (cliffs at K = {cliffs})"
    settings.k = int(session.k or 2)
    STATE.readout = measure(session)
    STATE.message = ""
    # what the analysis wants the user to know (a long take's window, a tolerance out of reach)
    STATE.notes = [said(note, label_of) for note in session.notes]
    return session


class _Operator:
    bl_options = {"REGISTER"}  # the host pushes its own undo step
    if TYPE_CHECKING:  # bpy.types.Operator's (Blender 3.0+), mixed in with it; not an
        # annotation at run time, which Blender would read as a property
        @classmethod
        def poll_message_set(cls, message: str) -> None: ...

    #: The armatures the operator acts on, the first that resolves (:func:`acted_on`):
    #: Analyze and Convert the active one; Apply and Suggested K the one analysed, whichever
    #: is active; Remove the active one, else the one analysed.
    targets: tuple[str, ...] = ("active",)
    #: Greyed out until an analysis (after a file was opened, Apply was not, and said
    #: "analyse first" when pressed).
    needs_analysis = False

    @classmethod
    def poll(cls, context: Any) -> bool:
        if cls.needs_analysis and (STATE.session is None or STATE.session.space is None):
            cls.poll_message_set("analyse first: press Analyze")
            return False
        try:
            acted_on(cls.targets)
        except SalientPosesError as exc:
            cls.poll_message_set(str(exc))  # the greyed button's tooltip says why
            return False
        return True


def acted_on(targets: tuple[str, ...]) -> BlenderHost:
    """The host of the first of ``targets`` that resolves: ``"active"``, the active armature
    (or the one armature selected, or in the scene); ``"analysed"``, the session's (a mesh
    made active after Analyze in a scene of several armatures greyed Apply out).

    Raises
    ------
    HostError
        None resolves (the first one's reason).
    """
    analysed = getattr(STATE.session.host, "armature", None) if STATE.session else None
    hosts = [BlenderHost(analysed if target == "analysed" else None) for target in targets
             if target == "active" or analysed is not None]
    failure: SalientPosesError | None = None
    for host in hosts:
        try:
            host.armature = host.object().name
        except SalientPosesError as exc:
            failure = failure or exc
            continue
        return host
    assert failure is not None
    raise failure


def _operators() -> list[type]:
    operator: Any = bpy.types.Operator

    class Analyze(_Operator, operator):
        """Find the optimal keyframes of the active armature's motion for every K"""

        bl_idname = "salient_poses.analyze"
        bl_label = "Analyze"

        def execute(self, context: Any) -> set[str]:
            try:
                session = analyze(context)
            except Exception as exc:  # noqa: BLE001 - said in the status bar, never a traceback
                return _fail(self, exc)
            # the preview's markers are a change: one undo step of their own (unpushed, the
            # next Ctrl+Z took them back with the user's edit before the analysis)
            bpy.ops.ed.undo_push(message="Salient Poses: analyze")
            space = session.space
            assert space is not None
            self.report({"INFO"}, f"Analysed frames {space.first_frame}..{space.last_frame}: "
                                  f"K = {session.k}")
            return {"FINISHED"}

    class SuggestedK(_Operator, operator):
        """Set K to the suggested value (the threshold rule)"""

        bl_idname = "salient_poses.suggested_k"
        bl_label = "Suggested K"
        targets = ("analysed", "active")
        needs_analysis = True

        def execute(self, context: Any) -> set[str]:
            assert STATE.session is not None  # (poll: needs_analysis)
            context.scene.salient_poses.k = STATE.session.suggested_k
            return {"FINISHED"}

    class Apply(_Operator, operator):
        """Write the keys of the current K into a new action on a new NLA track (one undo
        step; the original action is not touched)"""

        bl_idname = "salient_poses.apply"
        bl_label = "Apply"
        targets = ("analysed", "active")
        needs_analysis = True

        def invoke(self, context: Any, event: Any) -> set[str]:
            # layers of an Apply before: replace them or add another (a second Apply stacked
            # a copy without a word); a script's call takes the property as given
            session = STATE.session
            host = session.host if session is not None else None
            if isinstance(host, BlenderHost):
                try:
                    earlier = host.layers(edits=False)
                except SalientPosesError:
                    earlier = []
                if earlier:
                    title = f"{len(earlier)} Salient Poses layer(s) on {host.armature} already"
                    try:
                        return context.window_manager.invoke_props_dialog(self, title=title)
                    except TypeError:  # (Blender before 4.1: no title)
                        return context.window_manager.invoke_props_dialog(self)
            return self.execute(context)

        def execute(self, context: Any) -> set[str]:
            session = STATE.session
            assert session is not None  # (poll: needs_analysis)
            host = session.host
            try:
                if isinstance(host, BlenderHost):  # said as what it is, not as a change
                    host.check_writable()
                # (changed Analysis settings are refused by apply(): the keys of K come from
                # the space Analyze made with the old ones)
                session.options = options_from(context.scene.salient_poses)
                # Remove finds every layer in the file itself; a replacing Apply finds them
                # there too (an undo or a reopened file forgets what the session wrote)
                replacing = host.layers(edits=False) \
                    if self.layers == "REPLACE" and isinstance(host, BlenderHost) else []
                session.applied[:] = replacing
                reduction = session.apply(replace=bool(replacing))
            except Exception as exc:  # noqa: BLE001 - said in the status bar, never a traceback
                return _fail(self, exc)
            STATE.notes = [*(said(note, label_of) for note in session.notes),
                           *write_report(host)]  # the channels left alone (locked) too
            frames = reduction.frames
            STATE.message = (f"Applied {reduction.curves.n_keys} keys to "
                             f"{getattr(host, 'armature', None) or 'the armature'} over frames "
                             f"{int(frames[0])}..{int(frames[-1])}: "
                             f"{', '.join(h.name for h in session.applied)}"
                             + (f" (replacing {', '.join(h.name for h in replacing)})"
                                if replacing else ""))
            self.report({"INFO"}, STATE.message)
            return {"FINISHED"}

    class Remove(_Operator, operator):
        """Delete the NLA tracks and actions Salient Poses made on the active armature and
        make the original action active again (one undo step)"""

        bl_idname = "salient_poses.remove"
        bl_label = "Remove"
        targets = ("active", "analysed")

        def execute(self, context: Any) -> set[str]:
            try:
                host = acted_on(self.targets)
                handles = host.layers()
                if not handles and not host.pushed_down():  # (no undo step, markers kept)
                    STATE.message = (f"Nothing to remove: Salient Poses has no layer on "
                                     f"{host.armature}")
                    self.report({"INFO"}, STATE.message)
                    return {"CANCELLED"}
                with host.undo_chunk("Salient Poses: remove layers"):
                    for handle in reversed(handles):
                        host.remove_layer(handle)
                    # the layers deleted by hand (in the NLA editor): the original comes back
                    host.restore_original()
                    host.clear_preview()  # the key markers go with the layers
            except Exception as exc:  # noqa: BLE001 - said in the status bar, never a traceback
                return _fail(self, exc)
            if STATE.session is not None:
                STATE.session.applied.clear()
            # (with none left, the original is active again unless the user keyed an action
            # since, which the notes say)
            STATE.message = (f"Removed {len(handles)} layer(s) from {host.armature}" if handles
                             else f"Made the original action of {host.armature} active again "
                                  "(its Salient Poses layers were deleted)" if not host.notes
                             else f"No Salient Poses layer was left on {host.armature} (deleted "
                                  "by hand)")
            STATE.notes = list(host.notes)  # an action the user keyed since Apply: kept
            self.report({"INFO"}, STATE.message)
            return {"FINISHED"}

    class ConvertToEuler(_Operator, operator):
        """Give quaternion bones Euler rotation in a new action keyed on every frame (Blender's
        FBX importer makes quaternion bones); the original action is kept (one undo step)"""

        bl_idname = "salient_poses.convert_to_euler"
        bl_label = "Convert to Euler"

        def execute(self, context: Any) -> set[str]:
            host = BlenderHost()
            try:
                with host.undo_chunk("Salient Poses: convert to Euler"):
                    bones = host.convert_to_euler()
            except Exception as exc:  # noqa: BLE001 - said in the status bar, never a traceback
                return _fail(self, exc)
            if bones:
                # the armature now plays another action: an analysis of the one before would be
                # applied over it (and Apply would find the keys changed)
                reset()
            STATE.message = (host.notes[0] + "; analyse again") if bones \
                else "every bone is in Euler rotation already"
            self.report({"INFO"}, STATE.message)
            return {"FINISHED"}

    # (given as annotations, as Blender reads an operator's properties; here rather than in
    # the class body, where this module's postponed annotations would be strings)
    Apply.__annotations__ = {"layers": bpy.props.EnumProperty(
        name="Layers of an earlier Apply",
        items=[("REPLACE", "Replace them", "Delete the layers an earlier Apply wrote on this "
                "armature, in the same undo step (edits propagated onto it are kept)"),
               ("ADD", "Add another", "Keep them and write new layers above them")],
        default="REPLACE")}
    return [Analyze, SuggestedK, Apply, Remove, ConvertToEuler]


def _label(layout: Any, context: Any, text: str, icon: str = "NONE") -> None:
    """``text`` in lines that fit the sidebar's width (a Blender label does not wrap: a
    note of 300 characters showed its first 40), the icon on the first."""
    region = getattr(context, "region", None)
    width = getattr(region, "width", 0)
    if not width:  # (no region: a script's or a test's draw, shown whole)
        layout.label(text=text, icon=icon)
        return
    scale = getattr(getattr(context, "preferences", None), "view", None)
    pixels = CHARACTER_PIXELS * float(getattr(scale, "ui_scale", 1.0) or 1.0)
    lines = textwrap.wrap(text, max(20, int((width - 40) / pixels))) or [""]
    for i, line in enumerate(lines):
        layout.label(text=line, icon=icon if i == 0 else ("BLANK1" if icon != "NONE"
                                                          else "NONE"))


def draw(layout: Any, context: Any) -> None:
    settings = context.scene.salient_poses
    try:
        BlenderHost().object()
    except SalientPosesError as exc:  # the buttons are greyed out: say why, above them
        _label(layout, context, str(exc), icon="ERROR")
    fields = panel_fields()
    for group, heading in SECTIONS.items():
        box = layout.box()
        box.label(text=heading)
        for name, (where, _spec) in fields.items():
            if where == group:
                box.prop(settings, name)
        if group == "keys":  # how K is chosen, then Analyze and the K it chose
            box.operator("salient_poses.analyze")
            row = box.row(align=True)
            row.prop(settings, "k")
            row.operator("salient_poses.suggested_k", text="Suggested K")
            for line in (STATE.readout, STATE.suggestions):
                if line:
                    _label(box, context, line)
    row = layout.row(align=True)
    row.operator("salient_poses.apply")
    row.operator("salient_poses.remove")
    layout.operator("salient_poses.convert_to_euler")
    for line in [STATE.message, *STATE.notes]:
        if line:
            _label(layout, context, line, icon="INFO")


def _panels() -> list[type]:
    types = bpy.types
    made = []
    for space in ("GRAPH_EDITOR", "DOPESHEET_EDITOR"):
        made.append(type(f"SALIENTPOSES_PT_{space.lower()}", (types.Panel,), {
            "bl_label": "Salient Poses", "bl_space_type": space, "bl_region_type": "UI",
            "bl_category": CATEGORY,
            "draw": lambda self, context: draw(self.layout, context)}))
    return made


def _settings_type() -> type:
    annotations = {name: blender_property(name, group, spec)
                   for name, (group, spec) in panel_fields().items()}
    keys = field_specs()["keys"][1]
    annotations["k"] = bpy.props.IntProperty(
        name="K", description=keys.help, default=2, min=int(keys.low or 2), update=_k_changed)
    return type("SalientPosesSettings", (bpy.types.PropertyGroup,),
                {"__annotations__": annotations})


_REGISTERED: list[type] = []


def register() -> None:
    """Register the settings, operators and panels (Blender calls this on enabling)."""
    if _REGISTERED:
        return
    classes = [_settings_type(), *_operators(), *_panels()]
    for cls in classes:
        bpy.utils.register_class(cls)
    _REGISTERED.extend(classes)
    bpy.types.Scene.salient_poses = bpy.props.PointerProperty(type=classes[0])
    # persistent: Blender drops a handler without the mark when it loads a file
    bpy.app.handlers.load_post.append(bpy.app.handlers.persistent(_file_loaded))
    for handlers in (bpy.app.handlers.undo_post, bpy.app.handlers.redo_post):
        handlers.append(bpy.app.handlers.persistent(_undone))


def unregister() -> None:
    if not _REGISTERED:
        return
    del bpy.types.Scene.salient_poses
    for cls in reversed(_REGISTERED):
        bpy.utils.unregister_class(cls)
    _REGISTERED.clear()
    if _file_loaded in bpy.app.handlers.load_post:
        bpy.app.handlers.load_post.remove(_file_loaded)
    for handlers in (bpy.app.handlers.undo_post, bpy.app.handlers.redo_post):
        if _undone in handlers:
            handlers.remove(_undone)
    STATE.session = None
