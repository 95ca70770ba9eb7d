"""Enum members, states and transition rows as the diagrams must name them."""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from scaffold.diagramcheck import python_model as pm
from scaffold.diagramcheck.rules.model import Match, Requirement, mermaid_id, norm


def member_requirements(
    old_members: Sequence[pm.MemberInfo],
    new_members: Sequence[pm.MemberInfo],
    owner: str,
    label: str,
    diagram: str,
    old_path: str,
    new_path: str,
    as_states: bool = False,
) -> list[Requirement]:
    """Enum members (data model) or states (state diagram) added, removed, renamed."""
    kind = "state" if as_states else "member"
    match: Match = "state" if as_states else "name"
    scope = None if as_states else owner
    old_by = {m.name: m for m in old_members}
    new_by = {m.name: m for m in new_members}
    out: list[Requirement] = []
    for m in new_members:
        before = old_by.get(m.name)
        if before is not None and before.value == m.value:
            continue
        renamed_from = next(
            (o for o in old_members if o.name not in new_by and m.value and o.value == m.value),
            None,
        )
        note = f" (renamed from `{renamed_from.name}`)" if renamed_from else ""
        if before is not None:
            note = f" (value changed from {before.value!r})"
        shown = f"`{m.name}`" + (f" = {m.value!r}" if m.value and m.value != m.name else "")
        draft = (
            f"    state {mermaid_id(m.value or m.name)}"
            if as_states
            else f"    {owner} : {m.value or m.name}",
        )
        out.append(
            Requirement(
                f"{kind}-added" if before is None and not renamed_from else f"{kind}-changed",
                diagram,
                new_path,
                m.line,
                m.name,
                f"{kind} {shown} of {label}{note}",
                m.aliases if before is None else ((m.value,) if m.value else m.aliases),
                scope=scope,
                match=match,
                draft=draft,
            )
        )
    for o in old_members:
        after = new_by.get(o.name)
        if after is not None and after.value == o.value:
            continue
        gone = tuple(
            a
            for a in o.aliases
            if not any(
                a in n.aliases or (as_states and norm(a) in map(norm, n.aliases))
                for n in new_members
            )
        )
        if not gone:
            continue
        out.append(
            Requirement(
                f"{kind}-removed",
                diagram,
                old_path,
                o.line,
                o.name,
                f"{kind} `{o.name}` of {label}",
                gone,
                remove=True,
                scope=scope,
                match=match,
            )
        )
    return out


def transition_requirements(
    old_rows: Iterable[pm.Transition],
    new_rows: Iterable[pm.Transition],
    aliases: Mapping[str, tuple[str, ...]],
    label: str,
    diagram: str,
    old_path: str,
    new_path: str,
) -> list[Requirement]:
    def pairs(rows: Iterable[pm.Transition]) -> dict[tuple[str, str], pm.Transition]:
        found: dict[tuple[str, str], pm.Transition] = {}
        for row in rows:
            found.setdefault((row.source, row.target), row)
        return found

    before, after = pairs(old_rows), pairs(new_rows)

    def names(state: str) -> tuple[str, ...]:
        return aliases.get(state, (state,))

    out: list[Requirement] = []
    for gone, rows, others, path in (
        (False, after, before, new_path),
        (True, before, after, old_path),
    ):
        for (src, dst), row in rows.items():
            if (src, dst) in others:
                continue
            a, b = names(src)[-1], names(dst)[-1]
            event = f" : {row.event}" if row.event and not gone else ""
            out.append(
                Requirement(
                    "transition-removed" if gone else "transition-added",
                    diagram,
                    path,
                    row.line,
                    f"{src} --> {dst}",
                    f"transition `{a} --> {b}`"
                    + (f" on `{row.event}`" if event else "")
                    + f" of {label}",
                    names(src),
                    remove=gone,
                    match="edge",
                    target=names(dst),
                    draft=() if gone else (f"    {mermaid_id(a)} --> {mermaid_id(b)}{event}",),
                )
            )
    return out
