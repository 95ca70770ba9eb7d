"""The state diagram: state Enums, state machines and ``stateDiagram`` sources."""

from __future__ import annotations

import re

from scaffold.diagramcheck import mermaid
from scaffold.diagramcheck import python_model as pm
from scaffold.diagramcheck.paths import normalize_path
from scaffold.diagramcheck.rules.members import member_requirements, transition_requirements
from scaffold.diagramcheck.rules.model import Analysis, Requirement, SourceChange
from scaffold.diagramcheck.settings import DiagramSettings


def _real_states(machine: pm.MachineInfo | None) -> list[pm.MemberInfo]:
    """A machine's named states (``states=SomeEnum`` is handled as a state Enum)."""
    return [s for s in (machine.states if machine else ()) if not s.name.startswith("@enum:")]


def state_requirements(analysis: Analysis, cfg: DiagramSettings) -> list[Requirement]:
    """Transition tables and ``transitions`` machines."""
    enum_aliases: dict[str, dict[str, tuple[str, ...]]] = {}
    for _, old, new in analysis.pairs:
        for cls in (*(old.classes if old else ()), *(new.classes if new else ())):
            if cls.members:
                enum_aliases.setdefault(cls.name, {}).update(
                    {m.name: m.aliases for m in cls.members}
                )
    out: list[Requirement] = []
    for change, old, new in analysis.pairs:
        where = (normalize_path(cfg.states), change.source_path, change.path)
        old_tables = {(t.name, t.enum): t.rows for t in (old.tables if old else ())}
        new_tables = {(t.name, t.enum): t.rows for t in (new.tables if new else ())}
        for name, enum in dict.fromkeys([*old_tables, *new_tables]):
            out += transition_requirements(
                old_tables.get((name, enum), ()),
                new_tables.get((name, enum), ()),
                enum_aliases.get(enum, {}),
                f"transition table `{name}`",
                *where,
            )
        old_machines = {m.name: m for m in (old.machines if old else ())}
        new_machines = {m.name: m for m in (new.machines if new else ())}
        for name in dict.fromkeys([*old_machines, *new_machines]):
            bm, am = old_machines.get(name), new_machines.get(name)
            label = f"machine `{name}`"
            out += member_requirements(
                _real_states(bm), _real_states(am), name, label, *where, as_states=True
            )
            out += transition_requirements(
                bm.transitions if bm else (), am.transitions if am else (), {}, label, *where
            )
    return out


def _state_blocks(text: str | None, path: str) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
    """The states and edges of the ``stateDiagram`` blocks of a file, each with its line."""
    found: dict[str, int] = {}
    edges: dict[tuple[str, str], int] = {}
    for block in mermaid.extract_blocks(text or "", path):
        parsed = mermaid.parse_block(block)
        if not parsed.kinds[0].startswith("stateDiagram"):
            continue
        for n, line in enumerate(block.source.splitlines(), start=block.line):
            for s in parsed.states:
                if s not in found and re.search(rf"(?<![\w.\-]){re.escape(s)}(?![\w.\-])", line):
                    found[s] = n
            for e in parsed.edges:
                if e not in edges and re.search(
                    rf"{re.escape(e[0])}\s*-->\s*{re.escape(e[1])}", line
                ):
                    edges[e] = n
    return found, edges


def mermaid_source_requirements(change: SourceChange, cfg: DiagramSettings) -> list[Requirement]:
    """The states and transitions a ``stateDiagram`` source outside the diagrams gained or lost."""
    old_states, old_edges = _state_blocks(change.old_text, change.path)
    new_states, new_edges = _state_blocks(change.new_text, change.path)
    label = f"the state diagram in {change.path}"
    where = (normalize_path(cfg.states), change.source_path, change.path)
    out = member_requirements(
        [pm.MemberInfo(s, None, n) for s, n in old_states.items()],
        [pm.MemberInfo(s, None, n) for s, n in new_states.items()],
        label,
        label,
        *where,
        as_states=True,
    )
    transitions = transition_requirements(
        [pm.Transition(a, "", b, n) for (a, b), n in old_edges.items()],
        [pm.Transition(a, "", b, n) for (a, b), n in new_edges.items()],
        {},
        label,
        *where,
    )
    # A transition is only asked to go while both of its states stay.
    return out + [
        r
        for r in transitions
        if not r.remove or (r.accept[0] in new_states and r.target[0] in new_states)
    ]
