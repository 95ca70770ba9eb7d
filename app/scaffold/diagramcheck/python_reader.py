"""Reading one Python file's declarations with :mod:`ast` (nothing is imported or run):
:func:`read_module` gives the :class:`~scaffold.diagramcheck.python_model.ModuleInfo`."""

from __future__ import annotations

import ast

from scaffold.diagramcheck.python_model import (
    NAMEDTUPLE,
    TYPEDDICT,
    ClassInfo,
    FieldInfo,
    MemberInfo,
    ModuleInfo,
    SyntaxProblem,
    TableInfo,
    Transition,
)
from scaffold.diagramcheck.python_syntax import (
    annotation_text,
    dotted,
    is_classvar,
    last,
    resolve_relative,
    str_value,
)
from scaffold.diagramcheck.python_tables import read_machines, read_tables

_SM_STATES = {"State", "Compound", "Parallel"}  # python-statemachine
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
            dunder = name.startswith("__") and name.endswith("__")
            if is_classvar(stmt.annotation) or dunder or name == "model_config":
                continue
            if last(dotted(stmt.annotation)) == "Mapped":
                uses_mapped = True
            fields.append(FieldInfo(name, annotation_text(stmt.annotation), stmt.lineno))
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
                    typ = next((ast.unparse(k.value) for k in call.keywords if k.arg == "type"), "")
                    if not typ and func in _SQLA_COLUMN_CALLS and call.args:
                        first = call.args[0]
                        typ = last(
                            str(first.value) if isinstance(first, ast.Constant) else dotted(first)
                        )
                    fields.append(FieldInfo(target.id, typ, stmt.lineno))
    return fields, has_tablename, uses_mapped


def _enum_members(node: ast.ClassDef) -> list[MemberInfo]:
    members: list[MemberInfo] = []
    for stmt in node.body:
        targets: list[ast.expr]
        if isinstance(stmt, ast.Assign):
            targets, value = stmt.targets, stmt.value
        elif isinstance(stmt, ast.AnnAssign) and stmt.value is not None:
            targets, value = [stmt.target], stmt.value
        else:
            continue
        for target in targets:
            if isinstance(target, ast.Name) and not target.id.startswith("_"):
                val = str_value(value)
                if val is None and isinstance(value, ast.Tuple) and value.elts:
                    val = str_value(value.elts[0])
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
                        transitions.append(Transition(last(pair[0]), event, last(pair[1]), line))
            elif meth == "itself" and isinstance(expr.func.value, ast.Attribute):
                src = dotted(expr.func.value.value)  # ``idle.to.itself()``
                if src:
                    transitions.append(Transition(last(src), event, last(src), line))
            else:
                collect(expr.func.value, event, line)

    for stmt in node.body:
        if not isinstance(stmt, ast.Assign) or len(stmt.targets) != 1:
            continue
        target = stmt.targets[0]
        if not isinstance(target, ast.Name):
            continue
        value = stmt.value
        if isinstance(value, ast.Call) and last(dotted(value.func)) in _SM_STATES:
            label = str_value(value.args[0]) if value.args else None
            for kw in value.keywords:
                if kw.arg == "name":
                    label = str_value(kw.value) or label
            states.append(MemberInfo(target.id, label, stmt.lineno))
        else:
            collect(value, target.id, stmt.lineno)
    return states, transitions


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
    func = last(dotted(call.func))
    spec = call.args[1] if len(call.args) >= 2 else None  # the fields
    fields: list[FieldInfo] = []
    if func == "TypedDict" and isinstance(spec, ast.Dict):
        for k, v in zip(spec.keys, spec.values, strict=True):
            if k is not None and (s := str_value(k)) is not None:
                fields.append(FieldInfo(s, annotation_text(v), k.lineno))
        kind = TYPEDDICT
    elif func == "NamedTuple" and isinstance(spec, ast.List | ast.Tuple):
        for item in spec.elts:
            if (
                isinstance(item, ast.Tuple)
                and len(item.elts) == 2
                and (s := str_value(item.elts[0])) is not None
            ):
                fields.append(FieldInfo(s, annotation_text(item.elts[1]), item.lineno))
        kind = NAMEDTUPLE
    elif func == "namedtuple" and spec is not None:
        if (s := str_value(spec)) is not None:
            names = s.replace(",", " ").split()
        elif isinstance(spec, ast.List | ast.Tuple):
            names = [n for e in spec.elts if (n := str_value(e)) is not None]
        else:
            names = []
        fields = [FieldInfo(n, "", stmt.lineno) for n in names]
        kind = NAMEDTUPLE
    else:
        return None
    name = stmt.targets[0].id
    return ClassInfo(name, stmt.lineno, (), (), tuple(fields), functional_kind=kind)


def _imports(tree: ast.Module, module: str, is_package: bool) -> tuple[str, ...]:
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                base = resolve_relative("." * node.level + base, module, is_package)
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
        if isinstance(stmt, ast.ClassDef):
            found.append(stmt)
            _class_defs(stmt.body, found)
        elif isinstance(stmt, ast.If | ast.With | ast.AsyncWith):
            _class_defs(stmt.body, found)
            _class_defs(getattr(stmt, "orelse", []), found)
        elif isinstance(stmt, ast.Try | ast.TryStar):
            for part in (stmt.body, stmt.orelse, stmt.finalbody):
                _class_defs(part, found)
            for handler in stmt.handlers:
                _class_defs(handler.body, found)
    return found


def read_module(
    source: str, module: str = "", is_package: bool = False, *, imports: bool = False
) -> ModuleInfo:
    """Read one file's declarations. A syntax error yields ``error`` and nothing else.

    ``imports`` also lists the modules it imports (``module`` resolves relative ones).
    The tables come out in order: the module's, then those of its functions, then its
    classes'.
    """
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return ModuleInfo(error=SyntaxProblem(exc.lineno or 1, exc.msg or "invalid syntax"))
    except ValueError as exc:  # e.g. NUL bytes
        return ModuleInfo(error=SyntaxProblem(1, str(exc)))
    body = tree.body
    aliases = _aliases(body)
    imported = _imported(body)
    functionals = [cls for top in body if (cls := _functional(top)) is not None]
    function_tables: list[TableInfo] = []
    bases: list[str] = []
    for top in body:
        if (
            isinstance(top, ast.Assign)
            and isinstance(top.value, ast.Call)
            and last(dotted(top.value.func)) == "declarative_base"
        ):
            bases += [t.id for t in top.targets if isinstance(t, ast.Name)]
        elif isinstance(top, ast.FunctionDef | ast.AsyncFunctionDef):
            # Tables built by a module-level function (``def _rows(): rows = [...]``).
            function_tables += [
                TableInfo(f"{top.name}.{t.name}", t.enum, t.rows)
                for t in read_tables(top.body, aliases)
            ]
    classes: list[ClassInfo] = []
    class_tables: list[TableInfo] = []
    for node in _class_defs(body):
        fields, tablename, mapped = _class_fields(node)
        states, transitions = _sm_states_and_transitions(node)
        classes.append(
            ClassInfo(
                name=node.name,
                line=node.lineno,
                bases=tuple(
                    imported.get(b, aliases.get(b, b)) for b in (dotted(x) for x in node.bases) if b
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
        class_tables += read_tables(node.body, aliases)
    # Machine(...) calls can sit anywhere, so finding them walks the whole tree:
    # only done when the text can hold one.
    machines = read_machines(tree) if "Machine" in source else []
    return ModuleInfo(
        declarative_bases=tuple(bases),
        classes=(*classes, *functionals),
        tables=(*read_tables(body, aliases), *function_tables, *class_tables),
        machines=tuple(machines),
        imports=_imports(tree, module, is_package) if imports else (),
        imported=imported,
    )
