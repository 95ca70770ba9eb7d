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
    if machine is None:
        return []
    return [s for s in machine.states if not s.name.startswith("@enum:")]


def state_requirements(analysis: Analysis, cfg: DiagramSettings) -> list[Requirement]:
    """Transition tables and ``transitions`` machines."""
    states = normalize_path(cfg.states)
    out: list[Requirement] = []
    with_states = [
        (change, old, new)
        for change, old, new in analysis.pairs
        if (old is not None and (old.tables or old.machines))
        or (new is not None and (new.tables or new.machines))
    ]
    if not with_states:
        return out
    enum_aliases: dict[str, dict[str, tuple[str, ...]]] = {}
    for _, old, new in analysis.pairs:
        for info in (old, new):
            if info is None:
                continue
            for cls in info.classes:
                if cls.members:
                    enum_aliases.setdefault(cls.name, {}).update(
                        {m.name: m.aliases for m in cls.members}
                    )
    for change, old, new in with_states:
        old_tables = {(t.name, t.enum): t for t in (old.tables if old else ())}
        new_tables = {(t.name, t.enum): t for t in (new.tables if new else ())}
        for key in dict.fromkeys([*old_tables, *new_tables]):
            before, after = old_tables.get(key), new_tables.get(key)
            out += transition_requirements(
                before.rows if before else (),
                after.rows if after else (),
                enum_aliases.get(key[1], {}),
                f"transition table `{key[0]}`",
                states,
                change.source_path,
                change.path,
            )
        old_machines = {m.name: m for m in (old.machines if old else ())}
        new_machines = {m.name: m for m in (new.machines if new else ())}
        for name in dict.fromkeys([*old_machines, *new_machines]):
            bm, am = old_machines.get(name), new_machines.get(name)
            out += member_requirements(
                _real_states(bm),
                _real_states(am),
                name,
                f"machine `{name}`",
                states,
                change.source_path,
                change.path,
                as_states=True,
            )
            out += transition_requirements(
                bm.transitions if bm else (),
                am.transitions if am else (),
                {},
                f"machine `{name}`",
                states,
                change.source_path,
                change.path,
            )
    return out


def mermaid_source_requirements(change: SourceChange, cfg: DiagramSettings) -> list[Requirement]:
    states = normalize_path(cfg.states)

    def state_blocks(text: str | None) -> tuple[dict[str, int], dict[tuple[str, str], int]]:
        found: dict[str, int] = {}
        edges: dict[tuple[str, str], int] = {}
        if text is None:
            return found, edges
        for block in mermaid.extract_blocks(text, change.path):
            parsed = mermaid.parse_block(block)
            if not parsed.kind.startswith("stateDiagram"):
                continue
            for n, line in enumerate(block.source.splitlines(), start=block.line):
                for s in parsed.states:
                    if s not in found and re.search(
                        rf"(?<![\w.\-]){re.escape(s)}(?![\w.\-])", line
                    ):
                        found[s] = n
                for e in parsed.edges:
                    if e not in edges and re.search(
                        rf"{re.escape(e[0])}\s*-->\s*{re.escape(e[1])}", line
                    ):
                        edges[e] = n
        return found, edges

    old_states, old_edges = state_blocks(change.old_text)
    new_states, new_edges = state_blocks(change.new_text)
    out: list[Requirement] = []
    label = f"the state diagram in {change.path}"
    for s, line in new_states.items():
        if s not in old_states:
            out.append(
                Requirement(
                    "state-added",
                    states,
                    change.path,
                    line,
                    s,
                    f"state `{s}` of {label}",
                    (s,),
                    match="state",
                    draft=(f"    state {s}",),
                )
            )
    for s, line in old_states.items():
        if s not in new_states:
            out.append(
                Requirement(
                    "state-removed",
                    states,
                    change.source_path,
                    line,
                    s,
                    f"state `{s}` of {label}",
                    (s,),
                    remove=True,
                    match="state",
                )
            )
    for (a, b), line in new_edges.items():
        if (a, b) not in old_edges:
            out.append(
                Requirement(
                    "transition-added",
                    states,
                    change.path,
                    line,
                    f"{a} --> {b}",
                    f"transition `{a} --> {b}` of {label}",
                    (a,),
                    match="edge",
                    target=(b,),
                    draft=(f"    {a} --> {b}",),
                )
            )
    for (a, b), line in old_edges.items():
        if (a, b) not in new_edges and a in new_states and b in new_states:
            out.append(
                Requirement(
                    "transition-removed",
                    states,
                    change.source_path,
                    line,
                    f"{a} --> {b}",
                    f"transition `{a} --> {b}` of {label}",
                    (a,),
                    remove=True,
                    match="edge",
                    target=(b,),
                )
            )
    return out
