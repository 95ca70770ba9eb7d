"""What a Python file declares that the diagrams draw, read with :mod:`ast`.

:func:`read_module` turns source text into a :class:`ModuleInfo`: its classes
with their bases, decorators, annotated fields and Enum-style members, the
``State()`` attributes of python-statemachine classes, ``transitions``
``Machine(states=..., transitions=...)`` calls, transition tables (rows that
name two members of the same Enum: ``(state, event) -> state`` dicts, tuples or
calls), and the modules it imports. Nothing is imported or executed.

Which classes are dataclasses, pydantic models, Enums and so on is decided by
:func:`classify` over all the modules of a diff at once, so a class whose base
is a pydantic model in another changed file is a pydantic model too.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

# Kinds of class the data-model diagram draws.
DATACLASS = "dataclass"
PYDANTIC = "pydantic model"
ATTRS = "attrs class"
TYPEDDICT = "TypedDict"
NAMEDTUPLE = "NamedTuple"
SQLALCHEMY = "SQLAlchemy model"
ENUM = "Enum"
STATEMACHINE = "state machine"
# A declarative base (``class Base(DeclarativeBase)``): not a table itself.
_SQLA_BASE = "SQLAlchemy base"

DATA_KINDS = (DATACLASS, PYDANTIC, ATTRS, TYPEDDICT, NAMEDTUPLE, SQLALCHEMY, ENUM)

_ENUM_BASES = {"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag", "ReprEnum"}
_PYDANTIC_BASES = {"BaseModel", "RootModel", "BaseSettings", "GenericModel"}
_SQLA_BASES = {"DeclarativeBase", "DeclarativeBaseNoMeta", "MappedAsDataclass"}
_SM_BASES = {"StateMachine", "StateChart"}
# Library classes whose shape their subclasses inherit, by the name they are imported as.
_LIBRARY_KINDS = {
    "pydantic.ConfigDict": "TypedDict",
    "pydantic.config.ConfigDict": "TypedDict",
    "pydantic_settings.SettingsConfigDict": "TypedDict",
    "pydantic_settings.main.SettingsConfigDict": "TypedDict",
    "pydantic_settings.BaseSettings": "pydantic model",
    "pydantic.BaseModel": "pydantic model",
    "typing.TypedDict": "TypedDict",
    "typing_extensions.TypedDict": "TypedDict",
}
_DATACLASS_DECOS = {"dataclass", "dataclasses.dataclass", "pydantic.dataclasses.dataclass"}
_ATTRS_DECOS = {
    "attr.s",
    "attr.attrs",
    "attr.define",
    "attr.frozen",
    "attr.mutable",
    "attr.dataclass",
    "attrs.define",
    "attrs.frozen",
    "attrs.mutable",
    "define",
    "frozen",
    "mutable",
    "attrs",
    "attributes",
}
_ATTRS_FIELD_CALLS = {"attr.ib", "attr.attrib", "attrs.field", "field", "attr.field", "ib"}
_SQLA_COLUMN_CALLS = {
    "Column",
    "mapped_column",
    "relationship",
    "sa.Column",
    "db.Column",
    "sqlalchemy.Column",
    "orm.mapped_column",
    "orm.relationship",
    "db.relationship",
    "column_property",
    "synonym",
}
_MACHINE_CALLS = {
    "Machine",
    "GraphMachine",
    "HierarchicalMachine",
    "HierarchicalGraphMachine",
    "AsyncMachine",
    "HierarchicalAsyncMachine",
    "LockedMachine",
}
_WRAPPERS = {
    "ClassVar",
    "Final",
    "Mapped",
    "Annotated",
    "InitVar",
    "Required",
    "NotRequired",
    "ReadOnly",
}


@dataclass(frozen=True)
class FieldInfo:
    """A field: its name, its type as written (``""`` when untyped) and its line."""

    name: str
    type: str
    line: int


@dataclass(frozen=True)
class MemberInfo:
    """An Enum member or a state: its name, its string value if it has one, its line."""

    name: str
    value: str | None
    line: int

    @property
    def aliases(self) -> tuple[str, ...]:
        """The spellings a diagram may use: the name and the string value."""
        if self.value and self.value != self.name:
            return (self.name, self.value)
        return (self.name,)


@dataclass(frozen=True)
class Transition:
    """One row of a transition table or machine: ``source --event--> target``."""

    source: str
    event: str
    target: str
    line: int


@dataclass(frozen=True)
class ClassInfo:
    """A class (or a functional TypedDict/NamedTuple) as written in the source."""

    name: str
    line: int
    bases: tuple[str, ...]
    decorators: tuple[str, ...]
    fields: tuple[FieldInfo, ...] = ()
    members: tuple[MemberInfo, ...] = ()
    states: tuple[MemberInfo, ...] = ()
    transitions: tuple[Transition, ...] = ()
    has_tablename: bool = False
    uses_mapped: bool = False
    functional_kind: str | None = None


@dataclass(frozen=True)
class TableInfo:
    """A transition table: an assignment whose rows name members of ``enum``."""

    name: str
    line: int
    enum: str
    rows: tuple[Transition, ...]


@dataclass(frozen=True)
class MachineInfo:
    """A ``transitions`` machine: ``Machine(states=..., transitions=...)``."""

    name: str
    line: int
    states: tuple[MemberInfo, ...]
    transitions: tuple[Transition, ...]


@dataclass(frozen=True)
class SyntaxProblem:
    line: int
    message: str


@dataclass(frozen=True)
class ModuleInfo:
    classes: tuple[ClassInfo, ...] = ()
    tables: tuple[TableInfo, ...] = ()
    machines: tuple[MachineInfo, ...] = ()
    imports: tuple[str, ...] = ()
    error: SyntaxProblem | None = None
    aliases: Mapping[str, str] = field(default_factory=dict)
    # Names bound to ``declarative_base()`` (the pre-2.0 SQLAlchemy spelling).
    declarative_bases: tuple[str, ...] = ()
    # Top-level ``from m import X`` bindings: local name -> ``m.X`` as written, a
    # relative module keeping its leading dots (``..base.Model``).
    imported: Mapping[str, str] = field(default_factory=dict)

    def class_named(self, name: str) -> ClassInfo | None:
        for cls in self.classes:
            if cls.name == name:
                return cls
        return None


# --------------------------------------------------------------------------- helpers


def dotted(node: ast.AST) -> str:
    """``a.b.c`` for a Name/Attribute chain (calls and subscripts see through), else ``""``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = dotted(node.value)
        return f"{inner}.{node.attr}" if inner else ""
    if isinstance(node, ast.Call):
        return dotted(node.func)
    if isinstance(node, ast.Subscript):
        return dotted(node.value)
    return ""


def _last(name: str) -> str:
    return name.rsplit(".", 1)[-1]


def _annotation_text(node: ast.expr | None) -> str:
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text: str = node.value
        try:
            node = ast.parse(text, mode="eval").body
        except SyntaxError:
            return text
    # Mapped[int] -> int, Annotated[int, ...] -> int: the diagram shows the data type.
    while isinstance(node, ast.Subscript) and _last(dotted(node.value)) in _WRAPPERS:
        inner = node.slice
        node = inner.elts[0] if isinstance(inner, ast.Tuple) and inner.elts else inner
    return _plain_text(node) or ast.unparse(node)


def _plain_text(node: ast.expr) -> str:
    """What ``ast.unparse`` writes for the usual annotations (``x.Y``, ``list[str]``,
    ``dict[str, int]``, ``int | None``), cheaply; ``""`` for anything else."""
    kind = type(node)
    if kind is ast.Name:
        return node.id  # type: ignore[attr-defined, no-any-return]
    if kind is ast.Attribute:
        if type(node.value) is ast.BinOp:  # type: ignore[attr-defined]
            return ""  # unparse brackets it
        inner = _plain_text(node.value)  # type: ignore[attr-defined]
        return f"{inner}.{node.attr}" if inner else ""  # type: ignore[attr-defined]
    if kind is ast.Constant and node.value is None:  # type: ignore[attr-defined]
        return "None"
    if kind is ast.Subscript:
        if type(node.value) is ast.BinOp:  # type: ignore[attr-defined]
            return ""
        value = _plain_text(node.value)  # type: ignore[attr-defined]
        index = node.slice  # type: ignore[attr-defined]
        if isinstance(index, ast.Tuple):
            items = [_plain_text(e) for e in index.elts]
            inner = ", ".join(items) if items and all(items) else ""
        else:
            inner = _plain_text(index)
        return f"{value}[{inner}]" if value and inner else ""
    if kind is ast.BinOp and isinstance(node.op, ast.BitOr):  # type: ignore[attr-defined]
        left = _plain_text(node.left)  # type: ignore[attr-defined]
        right = _plain_text(node.right)  # type: ignore[attr-defined]
        # unparse brackets a right-hand ``|`` (``a | (b | c)``): left to it.
        if left and right and not isinstance(node.right, ast.BinOp):  # type: ignore[attr-defined]
            return f"{left} | {right}"
    return ""


def _is_classvar(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.startswith(("ClassVar", "typing.ClassVar"))
    return _last(dotted(node)) == "ClassVar"


def _str_value(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def _class_fields(node: ast.ClassDef) -> tuple[list[FieldInfo], bool, bool]:
    """Annotated and ``attr.ib()``/``Column()``-assigned names in the class body."""
    fields: list[FieldInfo] = []
    has_tablename = False
    uses_mapped = False
    for stmt in node.body:
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            name = stmt.target.id
            if name == "__tablename__":
                has_tablename = True
                continue
            annotation = stmt.annotation
            if type(annotation) is ast.Constant:
                last = ""  # dotted() of a constant
                classvar = _is_classvar(annotation)
            else:
                last = _last(dotted(annotation))
                classvar = last == "ClassVar"  # what _is_classvar finds
            if classvar or (name.startswith("__") and name.endswith("__")):
                continue
            if name == "model_config":
                continue
            if last == "Mapped":
                uses_mapped = True
            fields.append(FieldInfo(name, _annotation_text(stmt.annotation), stmt.lineno))
        elif isinstance(stmt, ast.Assign):
            for target in stmt.targets:
                if not isinstance(target, ast.Name):
                    continue
                if target.id == "__tablename__":
                    has_tablename = True
                    continue
                call = stmt.value
                if not isinstance(call, ast.Call):
                    continue
                func = dotted(call.func)
                if func in _ATTRS_FIELD_CALLS or func in _SQLA_COLUMN_CALLS:
                    typ = ""
                    for kw in call.keywords:
                        if kw.arg == "type":
                            typ = ast.unparse(kw.value)
                    if not typ and func in _SQLA_COLUMN_CALLS and call.args:
                        first = call.args[0]
                        typ = (
                            _str_value(first) or dotted(first)
                            if not isinstance(first, ast.Constant)
                            else str(first.value)
                        )
                        typ = _last(typ) if typ else ""
                    fields.append(FieldInfo(target.id, typ, stmt.lineno))
    return fields, has_tablename, uses_mapped


def _enum_members(node: ast.ClassDef) -> list[MemberInfo]:
    members: list[MemberInfo] = []
    for stmt in node.body:
        targets: list[ast.expr]
        value: ast.expr | None
        kind = type(stmt)  # ast.parse makes these exact types, never subclasses
        if kind is ast.Assign:
            targets, value = stmt.targets, stmt.value  # type: ignore[attr-defined]
        elif kind is ast.AnnAssign and stmt.value is not None:  # type: ignore[attr-defined]
            targets, value = [stmt.target], stmt.value  # type: ignore[attr-defined]
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and not target.id.startswith("_"):
                val = _str_value(value)
                if val is None and isinstance(value, ast.Tuple) and value.elts:
                    val = _str_value(value.elts[0])
                members.append(MemberInfo(target.id, val, stmt.lineno))
    return members


def _sm_states_and_transitions(node: ast.ClassDef) -> tuple[list[MemberInfo], list[Transition]]:
    """python-statemachine: ``x = State(...)`` attributes and ``go = a.to(b) | b.to(c)``."""
    states: list[MemberInfo] = []
    transitions: list[Transition] = []

    def collect(expr: ast.expr, event: str, line: int) -> None:
        if isinstance(expr, ast.BinOp) and isinstance(expr.op, ast.BitOr):
            collect(expr.left, event, line)
            collect(expr.right, event, line)
        elif isinstance(expr, ast.Call) and isinstance(expr.func, ast.Attribute):
            meth = expr.func.attr
            if meth in ("to", "from_"):
                src = dotted(expr.func.value)
                for arg in expr.args:
                    dst = dotted(arg)
                    if src and dst:
                        pair = (src, dst) if meth == "to" else (dst, src)
                        transitions.append(Transition(_last(pair[0]), event, _last(pair[1]), line))
            elif meth in ("itself",):
                src = dotted(expr.func.value)
                if src:
                    transitions.append(Transition(_last(src), event, _last(src), line))
            else:
                collect(expr.func.value, event, line)

    for stmt in node.body:
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
            continue
        target = stmt.targets[0]
        if not isinstance(target, ast.Name):
            continue
        value = stmt.value
        if type(value) is ast.Constant:
            continue  # neither a State() nor a transition (collect() finds nothing in it)
        if isinstance(value, ast.Call) and _last(dotted(value.func)) in (
            "State",
            "Compound",
            "Parallel",
        ):
            label = _str_value(value.args[0]) if value.args else None
            for kw in value.keywords:
                if kw.arg == "name":
                    label = _str_value(kw.value) or label
            states.append(MemberInfo(target.id, label, stmt.lineno))
        else:
            collect(value, target.id, stmt.lineno)
    return states, transitions


# --------------------------------------------------------------------------- tables


def _enum_ref(node: ast.expr, aliases: Mapping[str, str]) -> tuple[str, str] | None:
    """``(Enum, MEMBER)`` for ``Enum.MEMBER`` (aliases such as ``S = Lifecycle`` resolved).

    An enum is a class: its name starts upper-case, or its member is spelled in capitals.
    ``found.base`` (an attribute of a local value) names no member."""
    if isinstance(node, ast.Attribute):
        owner = dotted(node.value)
        if owner and node.attr[:1].isalpha():
            real = _last(aliases.get(owner, owner))
            if real[:1].isupper() or node.attr.isupper():
                return real, node.attr
    return None


def _row(
    items: list[ast.expr], aliases: Mapping[str, str], line: int
) -> tuple[str, Transition] | None:
    """A row naming two members of one Enum: the first is the source, the last the target."""
    refs = [(i, _enum_ref(item, aliases)) for i, item in enumerate(items)]
    by_enum: dict[str, list[tuple[int, str]]] = {}
    for i, ref in refs:
        if ref is not None:
            by_enum.setdefault(ref[0], []).append((i, ref[1]))
    for enum, found in by_enum.items():
        if len(found) >= 2:
            (si, src), (_, dst) = found[0], found[-1]
            event = ""
            for i, item in enumerate(items):
                if i != si and i != found[-1][0] and (i > si):
                    ref = _enum_ref(item, aliases)
                    event = ref[1] if ref else (_str_value(item) or dotted(item))
                    if event:
                        break
            return enum, Transition(src, event, dst, line)
    return None


def _table_rows(value: ast.expr, aliases: Mapping[str, str]) -> list[tuple[str, Transition]]:
    # See through wrappers such as MappingProxyType({...}) or tuple([...]).
    while isinstance(value, ast.Call) and len(value.args) == 1 and not value.keywords:
        value = value.args[0]
    rows: list[tuple[str, Transition]] = []
    if isinstance(value, ast.Dict):
        for key, val in zip(value.keys, value.values, strict=True):
            if key is None:
                continue
            key_items = list(key.elts) if isinstance(key, ast.Tuple) else [key]
            if isinstance(val, ast.Dict):  # {state: {event: state}}
                for k2, v2 in zip(val.keys, val.values, strict=True):
                    if k2 is None:
                        continue
                    found = _row([*key_items, k2, *_flat(v2)], aliases, key.lineno)
                    if found:
                        rows.append(found)
                continue
            found = _row([*key_items, *_flat(val)], aliases, key.lineno)
            if found:
                rows.append(found)
    elif isinstance(value, ast.List | ast.Tuple | ast.Set):
        for item in value.elts:
            if isinstance(item, ast.Tuple | ast.List):
                found = _row(list(item.elts), aliases, item.lineno)
            elif isinstance(item, ast.Call):
                found = _row([*item.args, *(k.value for k in item.keywords)], aliases, item.lineno)
            else:
                found = None
            if found:
                rows.append(found)
    return rows


def _flat(node: ast.expr) -> list[ast.expr]:
    if isinstance(node, ast.Tuple | ast.List):
        return list(node.elts)
    if isinstance(node, ast.Call):
        return [*node.args, *(k.value for k in node.keywords)]
    return [node]


def _tables(body: list[ast.stmt], aliases: Mapping[str, str]) -> list[TableInfo]:
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
        if type(value) is ast.Constant or type(value) is ast.Name:
            continue  # no rows in these (what _table_rows would find)
        rows = _table_rows(value, aliases)
        if len(rows) < 2:
            continue
        enums = {enum for enum, _ in rows}
        for enum in sorted(enums):
            mine = tuple(t for e, t in rows if e == enum)
            if len(mine) >= 2:
                tables.append(TableInfo(target.id, stmt.lineno, enum, mine))
    return tables


# --------------------------------------------------------------------------- transitions lib


def _literal_names(node: ast.expr, assigned: Mapping[str, ast.expr]) -> list[tuple[str, int]]:
    """State names from a ``states=`` argument: strings, ``{'name': ...}``, ``State('x')``."""
    if isinstance(node, ast.Name) and node.id in assigned:
        node = assigned[node.id]
    elif isinstance(node, ast.Attribute) and node.attr in assigned:
        node = assigned[node.attr]
    found: list[tuple[str, int]] = []
    if isinstance(node, ast.List | ast.Tuple | ast.Set):
        for item in node.elts:
            if (s := _str_value(item)) is not None:
                found.append((s, item.lineno))
            elif isinstance(item, ast.Dict):
                for k, v in zip(item.keys, item.values, strict=True):
                    if k is not None and _str_value(k) == "name" and (s := _str_value(v)):
                        found.append((s, item.lineno))
            elif isinstance(item, ast.Call) and item.args and (s := _str_value(item.args[0])):
                found.append((s, item.lineno))
            elif isinstance(item, ast.Attribute):
                found.append((item.attr, item.lineno))
    elif isinstance(node, ast.Attribute | ast.Name):
        # states=SomeEnum: the enum's members are the states.
        found.append(("@enum:" + _last(dotted(node)), node.lineno))
    return found


def _literal_transitions(node: ast.expr, assigned: Mapping[str, ast.expr]) -> list[Transition]:
    if isinstance(node, ast.Name) and node.id in assigned:
        node = assigned[node.id]
    elif isinstance(node, ast.Attribute) and node.attr in assigned:
        node = assigned[node.attr]
    out: list[Transition] = []
    if not isinstance(node, ast.List | ast.Tuple):
        return out
    for item in node.elts:
        trigger = src = dst = None
        sources: list[str] = []
        if isinstance(item, ast.List | ast.Tuple) and len(item.elts) >= 3:
            trigger = _str_value(item.elts[0])
            s, d = item.elts[1], item.elts[2]
            sources = _names_of(s)
            dst = _str_value(d) or (d.attr if isinstance(d, ast.Attribute) else None)
        elif isinstance(item, ast.Dict):
            vals = {_str_value(k): v for k, v in zip(item.keys, item.values, strict=True) if k}
            trigger = _str_value(vals["trigger"]) if "trigger" in vals else None
            if "source" in vals:
                sources = _names_of(vals["source"])
            if "dest" in vals:
                d = vals["dest"]
                dst = _str_value(d) or (d.attr if isinstance(d, ast.Attribute) else None)
        for src in sources:
            if dst is not None:
                out.append(Transition(src, trigger or "", dst, item.lineno))
    return out


def _names_of(node: ast.expr) -> list[str]:
    if (s := _str_value(node)) is not None:
        return [s]
    if isinstance(node, ast.Attribute):
        return [node.attr]
    if isinstance(node, ast.List | ast.Tuple):
        return [n for e in node.elts for n in _names_of(e)]
    return []


def _machines(tree: ast.Module) -> list[MachineInfo]:
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
            if isinstance(child, ast.Call) and _last(dotted(child.func)) in _MACHINE_CALLS:
                kw = {k.arg: k.value for k in child.keywords if k.arg}
                states_node = kw.get("states")
                if states_node is None and len(child.args) >= 2:
                    states_node = child.args[1]
                trans_node = kw.get("transitions")
                if trans_node is None and len(child.args) >= 4:
                    trans_node = child.args[3]
                if states_node is not None or trans_node is not None:
                    states = [
                        MemberInfo(s, None, line)
                        for s, line in (
                            _literal_names(states_node, assigned) if states_node else []
                        )
                    ]
                    trans = _literal_transitions(trans_node, assigned) if trans_node else []
                    machines.append(
                        MachineInfo(
                            owner or f"Machine{child.lineno}",
                            child.lineno,
                            tuple(states),
                            tuple(trans),
                        )
                    )
            visit(child, name)

    visit(tree, "")
    return machines


# --------------------------------------------------------------------------- module


def _aliases(body: list[ast.stmt]) -> dict[str, str]:
    """Local names that stand for another name: ``import x as y``, ``S = Lifecycle``."""
    aliases: dict[str, str] = {}
    for stmt in body:
        if isinstance(stmt, (ast.ImportFrom, ast.Import)):
            for alias in stmt.names:
                if alias.asname:
                    aliases[alias.asname] = alias.name
        elif (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Name | ast.Attribute)
        ):
            aliases[stmt.targets[0].id] = dotted(stmt.value)
    return aliases


def _imported(body: list[ast.stmt]) -> dict[str, str]:
    """``from m import X as Y`` at module level (also under ``if``/``try``): ``Y -> m.X``."""
    found: dict[str, str] = {}
    stack: list[ast.stmt] = list(body)
    while stack:
        stmt = stack.pop(0)
        if isinstance(stmt, ast.ImportFrom):
            mod = "." * stmt.level + (stmt.module or "")
            for alias in stmt.names:
                if alias.name != "*":
                    sep = "" if mod.endswith(".") else "."
                    found.setdefault(alias.asname or alias.name, f"{mod}{sep}{alias.name}")
        elif isinstance(stmt, ast.If | ast.Try | ast.TryStar):
            stack += stmt.body + stmt.orelse
            stack += [s for h in getattr(stmt, "handlers", []) for s in h.body]
    return found


def _functional(stmt: ast.stmt) -> ClassInfo | None:
    """``X = TypedDict("X", {...})``, ``X = NamedTuple("X", [...])``, ``namedtuple(...)``."""
    if not (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and isinstance(stmt.value, ast.Call)
    ):
        return None
    call = stmt.value
    func = _last(dotted(call.func))
    name = stmt.targets[0].id
    fields: list[FieldInfo] = []
    if func == "TypedDict" and len(call.args) >= 2 and isinstance(call.args[1], ast.Dict):
        for k, v in zip(call.args[1].keys, call.args[1].values, strict=True):
            if k is not None and (s := _str_value(k)) is not None:
                fields.append(FieldInfo(s, _annotation_text(v), k.lineno))
        kind = TYPEDDICT
    elif (
        func == "NamedTuple"
        and len(call.args) >= 2
        and isinstance(call.args[1], ast.List | ast.Tuple)
    ):
        for item in call.args[1].elts:
            if (
                isinstance(item, ast.Tuple)
                and len(item.elts) == 2
                and (s := _str_value(item.elts[0])) is not None
            ):
                fields.append(FieldInfo(s, _annotation_text(item.elts[1]), item.lineno))
        kind = NAMEDTUPLE
    elif func == "namedtuple" and len(call.args) >= 2:
        spec = call.args[1]
        if (s := _str_value(spec)) is not None:
            names = s.replace(",", " ").split()
        elif isinstance(spec, ast.List | ast.Tuple):
            names = [n for e in spec.elts if (n := _str_value(e)) is not None]
        else:
            names = []
        fields = [FieldInfo(n, "", stmt.lineno) for n in names]
        kind = NAMEDTUPLE
    else:
        return None
    return ClassInfo(name, stmt.lineno, (), (), tuple(fields), functional_kind=kind)


def _imports(tree: ast.Module, module: str, is_package: bool) -> tuple[str, ...]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = module.split(".")
                keep = len(parts) - node.level + (1 if is_package else 0)
                prefix = ".".join(parts[: max(keep, 0)])
                base = f"{prefix}.{base}".strip(".") if base else prefix
            if not base:
                continue
            found.add(base)
            found.update(f"{base}.{alias.name}" for alias in node.names if alias.name != "*")
    return tuple(sorted(found))


def _class_defs(body: list[ast.stmt], out: list[ast.ClassDef] | None = None) -> list[ast.ClassDef]:
    """Classes declared at module or class level (also under ``if``/``try``/``with``).

    Classes inside functions are left out: they are not part of a module's model,
    and not descending into function bodies keeps large files cheap to read.
    """
    found: list[ast.ClassDef] = [] if out is None else out
    for stmt in body:
        kind = type(stmt)
        if kind is ast.ClassDef:
            found.append(stmt)  # type: ignore[arg-type]
            _class_defs(stmt.body, found)  # type: ignore[attr-defined]
        elif kind is ast.If or kind is ast.With or kind is ast.AsyncWith:
            _class_defs(stmt.body, found)  # type: ignore[attr-defined]
            _class_defs(getattr(stmt, "orelse", []), found)
        elif kind is ast.Try or kind is ast.TryStar:
            for part in (stmt.body, stmt.orelse, stmt.finalbody):  # type: ignore[attr-defined]
                _class_defs(part, found)
            for handler in stmt.handlers:  # type: ignore[attr-defined]
                _class_defs(handler.body, found)
    return found


def read_module(
    source: str, module: str = "", is_package: bool = False, *, imports: bool = False
) -> ModuleInfo:
    """Read one file's declarations. A syntax error yields ``error`` and nothing else.

    ``imports`` also lists the modules it imports (``module`` resolves relative ones).
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return ModuleInfo(error=SyntaxProblem(exc.lineno or 1, exc.msg or "invalid syntax"))
    except ValueError as exc:  # e.g. NUL bytes
        return ModuleInfo(error=SyntaxProblem(1, str(exc)))
    return _module_info(tree, source, module, is_package, imports)


def _module_info(
    tree: ast.Module, source: str, module: str, is_package: bool, imports: bool
) -> ModuleInfo:
    """What the top-level statements declare.

    One pass over the statements, each read only by what can use its kind; the tables
    come out in order: the module's, then those of its functions, then its classes'.
    """
    body = tree.body
    aliases = _aliases(body)
    imported = _imported(body)
    classes: list[ClassInfo] = []
    functionals: list[ClassInfo] = []
    tables: list[TableInfo] = []
    function_tables: list[TableInfo] = []
    class_tables: list[TableInfo] = []
    bases: list[str] = []
    for top in body:
        kind = type(top)
        if kind is ast.Assign or kind is ast.AnnAssign:
            tables += _tables([top], aliases)
            functional = _functional(top)
            if functional is not None:
                functionals.append(functional)
            if (
                isinstance(top, ast.Assign)
                and isinstance(top.value, ast.Call)
                and _last(dotted(top.value.func)) == "declarative_base"
            ):
                bases += [t.id for t in top.targets if isinstance(t, ast.Name)]
        elif isinstance(top, ast.FunctionDef | ast.AsyncFunctionDef):
            # Tables built by a module-level function (``def _rows(): rows = [...]``).
            function_tables += [
                TableInfo(f"{top.name}.{t.name}", t.line, t.enum, t.rows)
                for t in _tables(top.body, aliases)
            ]
        elif isinstance(top, _HOLDS_CLASSES):
            for node in _class_defs([top]):
                fields, tablename, mapped = _class_fields(node)
                states, transitions = _sm_states_and_transitions(node)
                classes.append(
                    ClassInfo(
                        name=node.name,
                        line=node.lineno,
                        bases=tuple(
                            imported.get(b, aliases.get(b, b))
                            for b in (dotted(x) for x in node.bases)
                            if b
                        ),
                        decorators=tuple(
                            aliases.get(d, d) for d in (dotted(x) for x in node.decorator_list) if d
                        ),
                        fields=tuple(fields),
                        members=tuple(_enum_members(node)),
                        states=tuple(states),
                        transitions=tuple(transitions),
                        has_tablename=tablename,
                        uses_mapped=mapped,
                    )
                )
                class_tables += _tables(node.body, aliases)
    # Machine(...) calls can sit anywhere, so finding them walks the whole tree:
    # only done when the text can hold one.
    machines = _machines(tree) if "Machine" in source else []
    return ModuleInfo(
        declarative_bases=tuple(bases),
        classes=(*classes, *functionals),
        tables=(*tables, *function_tables, *class_tables),
        machines=tuple(machines),
        imports=_imports(tree, module, is_package) if imports else (),
        aliases=aliases,
        imported=imported,
    )


# Statements _class_defs looks into.
_HOLDS_CLASSES = (ast.ClassDef, ast.If, ast.With, ast.AsyncWith, ast.Try, ast.TryStar)


# --------------------------------------------------------------------------- classify


def _direct_kind(cls: ClassInfo) -> str | None:
    if cls.functional_kind:
        return cls.functional_kind
    for base in cls.bases:
        if base in _LIBRARY_KINDS:
            return _LIBRARY_KINDS[base]
    decos = set(cls.decorators)
    if decos & _DATACLASS_DECOS:
        return DATACLASS
    if decos & _ATTRS_DECOS:
        return ATTRS
    bases = {_last(b) for b in cls.bases}
    if bases & _SM_BASES:
        return STATEMACHINE
    if bases & _ENUM_BASES:
        return ENUM
    if bases & _PYDANTIC_BASES:
        return PYDANTIC
    if "TypedDict" in bases:
        return TYPEDDICT
    if "NamedTuple" in bases:
        return NAMEDTUPLE
    if bases & _SQLA_BASES:
        return _SQLA_BASE
    if cls.has_tablename or cls.uses_mapped:
        return SQLALCHEMY
    return None


def classify(classes: Iterable[ClassInfo], declarative_bases: Iterable[str] = ()) -> dict[str, str]:
    """The kind of every class name that has one, following bases transitively.

    ``declarative_bases`` are names bound by ``declarative_base()`` calls. A class
    deriving from a pydantic model, an Enum, a TypedDict, a state machine or a
    declarative base (anywhere in ``classes``) gets that kind; decorators
    (dataclass, attrs) are not inherited.
    """
    pool = list(classes)
    kinds: dict[str, str] = dict.fromkeys(declarative_bases, _SQLA_BASE)
    for cls in pool:
        kind = _direct_kind(cls)
        if kind is not None and kinds.get(cls.name) in (None, _SQLA_BASE):
            kinds[cls.name] = kind
    inheritable = {PYDANTIC, ENUM, TYPEDDICT, STATEMACHINE, _SQLA_BASE, SQLALCHEMY}
    changed = True
    while changed:
        changed = False
        for cls in pool:
            if cls.name in kinds and kinds[cls.name] != _SQLA_BASE:
                continue
            for base in cls.bases:
                inherited = kinds.get(_last(base))
                if inherited in inheritable and base != cls.name:
                    new = SQLALCHEMY if inherited == _SQLA_BASE else inherited
                    if kinds.get(cls.name) != new:
                        kinds[cls.name] = new
                        changed = True
                    break
    return {name: kind for name, kind in kinds.items() if kind != _SQLA_BASE}
