"""Transition tables (rows naming two members of one Enum) and ``transitions``
``Machine(states=..., transitions=...)`` calls, read from a module's syntax tree."""

from __future__ import annotations

import ast
from collections.abc import Mapping

from scaffold.diagramcheck.python_model import MachineInfo, MemberInfo, TableInfo, Transition
from scaffold.diagramcheck.python_syntax import dotted, last, str_value

_MACHINE_CALLS = {
    "Machine",
    "GraphMachine",
    "HierarchicalMachine",
    "HierarchicalGraphMachine",
    "AsyncMachine",
    "HierarchicalAsyncMachine",
    "LockedMachine",
}


def _enum_ref(node: ast.expr, aliases: Mapping[str, str]) -> tuple[str, str] | None:
    """``(Enum, MEMBER)`` for ``Enum.MEMBER`` (aliases such as ``S = Lifecycle`` resolved).

    An enum is a class: its name starts upper-case, or its member is spelled in capitals.
    ``found.base`` (an attribute of a local value) names no member."""
    if isinstance(node, ast.Attribute):
        owner = dotted(node.value)
        if owner and node.attr[:1].isalpha():
            real = last(aliases.get(owner, owner))
            if real[:1].isupper() or node.attr.isupper():
                return real, node.attr
    return None


def _row(
    items: list[ast.expr], aliases: Mapping[str, str], line: int
) -> tuple[str, Transition] | None:
    """A row naming two members of one Enum: the first is the source, the last the target."""
    refs = [_enum_ref(item, aliases) for item in items]
    by_enum: dict[str, list[tuple[int, str]]] = {}
    for i, ref in enumerate(refs):
        if ref is not None:
            by_enum.setdefault(ref[0], []).append((i, ref[1]))
    for enum, found in by_enum.items():
        if len(found) >= 2:
            (si, src), (di, dst) = found[0], found[-1]
            # The event: the first other item after the source that names something.
            events = (
                ref[1] if (ref := refs[i]) else (str_value(item) or dotted(item))
                for i, item in enumerate(items)
                if i > si and i != di
            )
            return enum, Transition(src, next(filter(None, events), ""), dst, line)
    return None


def _table_rows(value: ast.expr, aliases: Mapping[str, str]) -> list[tuple[str, Transition]]:
    # See through wrappers such as MappingProxyType({...}) or tuple([...]).
    while isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
        value = value.args[0]
    candidates: list[tuple[list[ast.expr], int]] = []  # a row's items, and its line
    if isinstance(value, ast.Dict):
        for key, val in zip(value.keys, value.values, strict=True):
            if key is None:
                continue
            key_items = list(key.elts) if isinstance(key, ast.Tuple) else [key]
            if isinstance(val, ast.Dict):  # {state: {event: state}}
                candidates += [
                    ([*key_items, k2, *_flat(v2)], key.lineno)
                    for k2, v2 in zip(val.keys, val.values, strict=True)
                    if k2 is not None
                ]
            else:
                candidates.append(([*key_items, *_flat(val)], key.lineno))
    elif isinstance(value, ast.List | ast.Tuple | ast.Set):
        candidates = [
            (_flat(item), item.lineno)
            for item in value.elts
            if isinstance(item, ast.Tuple | ast.List | ast.Call)
        ]
    return [row for items, line in candidates if (row := _row(items, aliases, line))]


def _flat(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.Tuple | ast.List):
        return list(node.elts)
    if isinstance(node, ast.Call):
        return [*node.args, *(k.value for k in node.keywords)]
    return [node]


def read_tables(body: list[ast.stmt], aliases: Mapping[str, str]) -> list[TableInfo]:
    tables: list[TableInfo] = []
    for stmt in body:
        target: ast.expr | None = None
        value: ast.expr | None = None
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1:
            target, value = stmt.targets[0], stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            target, value = stmt.target, stmt.value
        if not isinstance(target, ast.Name) or value is None:
            continue
        rows = _table_rows(value, aliases)
        for enum in sorted({enum for enum, _ in rows}):
            mine = tuple(t for e, t in rows if e == enum)
            if len(mine) >= 2:
                tables.append(TableInfo(target.id, enum, mine))
    return tables


def _value_of(node: ast.expr, assigned: Mapping[str, ast.expr]) -> ast.expr:
    """What a name (``states``, ``self.states``) was assigned, else the node itself."""
    if isinstance(node, ast.Name) and node.id in assigned:
        return assigned[node.id]
    if isinstance(node, ast.Attribute) and node.attr in assigned:
        return assigned[node.attr]
    return node


def _literal_names(node: ast.expr, assigned: Mapping[str, ast.expr]) -> list[tuple[str, int]]:
    """State names from a ``states=`` argument: strings, ``{'name': ...}``, ``State('x')``."""
    node = _value_of(node, assigned)
    found: list[tuple[str, int]] = []
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        for item in node.elts:
            if (s := str_value(item)) is not None:
                found.append((s, item.lineno))
            elif isinstance(item, ast.Dict):
                for k, v in zip(item.keys, item.values, strict=True):
                    if k is not None and str_value(k) == "name" and (s := str_value(v)):
                        found.append((s, item.lineno))
            elif isinstance(item, ast.Call) and item.args and (s := str_value(item.args[0])):
                found.append((s, item.lineno))
            elif isinstance(item, ast.Attribute):
                found.append((item.attr, item.lineno))
    elif isinstance(node, ast.Attribute | ast.Name):
        # states=SomeEnum: the enum's members are the states.
        found.append(("@enum:" + last(dotted(node)), node.lineno))
    return found


def _literal_transitions(node: ast.expr, assigned: Mapping[str, ast.expr]) -> list[Transition]:
    node = _value_of(node, assigned)
    out: list[Transition] = []
    if not isinstance(node, ast.List | ast.Tuple):
        return out
    for item in node.elts:
        trigger = dst = None
        sources: list[str] = []
        if isinstance(item, ast.List | ast.Tuple) and len(item.elts) >= 3:
            trigger = str_value(item.elts[0])
            sources = _names_of(item.elts[1])
            dst = _name(item.elts[2]) or None
        elif isinstance(item, ast.Dict):
            vals = {str_value(k): v for k, v in zip(item.keys, item.values, strict=True) if k}
            trigger = str_value(vals["trigger"]) if "trigger" in vals else None
            sources = _names_of(vals["source"]) if "source" in vals else []
            dst = (_name(vals["dest"]) or None) if "dest" in vals else None
        if dst is not None:
            out += [Transition(src, trigger or "", dst, item.lineno) for src in sources]
    return out


def _name(node: ast.expr) -> str | None:
    """A state named by a string or an attribute (``States.open``)."""
    return node.attr if isinstance(node, ast.Attribute) else str_value(node)


def _names_of(node: ast.expr) -> list[str]:
    if (s := _name(node)) is not None:
        return [s]
    if isinstance(node, ast.List | ast.Tuple):
        return [n for e in node.elts for n in _names_of(e)]
    return []


def read_machines(tree: ast.Module) -> list[MachineInfo]:
    """Every ``Machine(states=..., transitions=...)`` call, named by where it lives."""
    assigned: dict[str, ast.expr] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                assigned.setdefault(target.id, node.value)
            elif isinstance(target, ast.Attribute):
                assigned.setdefault(target.attr, node.value)
    machines: list[MachineInfo] = []

    def visit(node: ast.AST, owner: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = owner
            if isinstance(child, ast.ClassDef):
                name = child.name
            if isinstance(child, ast.Call) and last(dotted(child.func)) in _MACHINE_CALLS:
                # Machine(model, states, initial, transitions, ...), or by keyword.
                names = ("model", "states", "initial", "transitions")
                kw = dict(zip(names, child.args, strict=False))
                kw.update((k.arg, k.value) for k in child.keywords if k.arg)
                states_node, trans_node = kw.get("states"), kw.get("transitions")
                if states_node is not None or trans_node is not None:
                    states = _literal_names(states_node, assigned) if states_node else []
                    trans = _literal_transitions(trans_node, assigned) if trans_node else []
                    machines.append(
                        MachineInfo(
                            owner or f"Machine{child.lineno}",
                            tuple(MemberInfo(s, None, line) for s, line in states),
                            tuple(trans),
                        )
                    )
            visit(child, name)

    visit(tree, "")
    return machines
