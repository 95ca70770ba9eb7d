"""The data-model diagram: data classes, their fields and their members."""

from __future__ import annotations

from scaffold.diagramcheck import python_model as pm
from scaffold.diagramcheck.paths import normalize_path
from scaffold.diagramcheck.rules.classes import Located, data_classes
from scaffold.diagramcheck.rules.members import member_requirements, transition_requirements
from scaffold.diagramcheck.rules.model import Analysis, Requirement
from scaffold.diagramcheck.rules.type_text import (
    MAX_DRAFT_FIELDS,
    class_draft,
    field_line,
    same_type,
    type_words,
)
from scaffold.diagramcheck.settings import DiagramSettings


def _field_requirements(old: Located, new: Located, diagram: str) -> list[Requirement]:
    cls = new.cls.name
    label = f"{new.kind} `{cls}`"

    def need(kind: str, f: pm.FieldInfo, shown: str, note: str = "") -> Requirement:
        what = f"field {shown} of {label}{note}"
        also = () if kind == "field-renamed" else type_words(f.type)
        draft = (f"    {cls} : {field_line(f)}",)
        return Requirement(
            kind,
            diagram,
            new.path,
            f.line,
            f.name,
            what,
            (f.name,),
            scope=cls,
            also=also,
            draft=draft,
        )

    def drop(kind: str, f: pm.FieldInfo, note: str = "") -> Requirement:
        what = f"field `{f.name}` of {label}{note}"
        return Requirement(
            kind, diagram, old.path, f.line, f.name, what, (f.name,), remove=True, scope=cls
        )

    out: list[Requirement] = []
    old_fields = {f.name: f for f in old.cls.fields}
    new_fields = {f.name: f for f in new.cls.fields}
    added = [f for n, f in new_fields.items() if n not in old_fields]
    removed = [f for n, f in old_fields.items() if n not in new_fields]
    if len(added) == 1 and len(removed) == 1:
        a, r = added[0], removed[0]
        out.append(need("field-renamed", a, f"`{a.name}`", f" (renamed from `{r.name}`)"))
        out.append(drop("field-renamed", r, f" (renamed to `{a.name}`)"))
        added, removed = [], []
    for f in added:
        out.append(need("field-added", f, f"`{f.name}: {f.type}`" if f.type else f"`{f.name}`"))
    out += [drop("field-removed", f) for f in removed]
    for name, f in new_fields.items():
        before = old_fields.get(name)
        if before is not None and f.type and not same_type(before.type, f.type):
            note = f" retyped from `{before.type or '?'}` to `{f.type}`"
            out.append(need("field-retyped", f, f"`{f.name}`", note))
    return out


def class_requirements(analysis: Analysis, cfg: DiagramSettings) -> list[Requirement]:
    data_model = normalize_path(cfg.data_model)
    states = normalize_path(cfg.states)
    old_all = data_classes(analysis, cfg, "old")
    new_all = data_classes(analysis, cfg, "new")
    out: list[Requirement] = []
    for name, new in new_all.items():
        old = old_all.get(name)
        if old is not None and old.kind != new.kind and pm.ENUM in (old.kind, new.kind):
            old = None
        machine = new.kind == pm.STATEMACHINE
        if machine or (new.kind == pm.ENUM and name in analysis.state_enums):
            what = f"state machine `{name}`" if machine else f"state enum `{name}`"
            where = (states, old.path if old else new.path, new.path)
            old_states = (old.cls.states if machine else old.cls.members) if old else ()
            new_states = new.cls.states if machine else new.cls.members
            out += member_requirements(old_states, new_states, name, what, *where, as_states=True)
            if machine:
                aliases = {s.name: s.aliases for s in (*new_states, *old_states)}
                before = old.cls.transitions if old else ()
                out += transition_requirements(before, new.cls.transitions, aliases, what, *where)
            continue
        if old is None:
            listed = new.cls.members if new.kind == pm.ENUM else new.cls.fields
            fields = ", ".join(f.name for f in listed[:MAX_DRAFT_FIELDS])
            out.append(
                Requirement(
                    "class-added",
                    data_model,
                    new.path,
                    new.cls.line,
                    name,
                    f"{new.kind} `{name}`" + (f" ({fields})" if fields else ""),
                    (name,),
                    draft=class_draft(new.cls, new.kind),
                )
            )
            # Every field or member of a new class is new.
            old = Located(pm.ClassInfo(name, new.cls.line, (), ()), new.path, new.kind)
        if new.kind == pm.ENUM:
            label, where = f"Enum `{name}`", (data_model, old.path, new.path)
            out += member_requirements(old.cls.members, new.cls.members, name, label, *where)
        else:
            out += _field_requirements(old, new, data_model)
    for name, old in old_all.items():
        if name in new_all:
            continue
        if old.kind == pm.STATEMACHINE or name in analysis.state_enums:
            members = old.cls.states if old.kind == pm.STATEMACHINE else old.cls.members
            out += member_requirements(
                members, (), name, f"`{name}`", states, old.path, old.path, as_states=True
            )
            continue
        out.append(
            Requirement(
                "class-removed",
                data_model,
                old.path,
                old.cls.line,
                name,
                f"{old.kind} `{name}`",
                (name,),
                remove=True,
            )
        )
    return out
