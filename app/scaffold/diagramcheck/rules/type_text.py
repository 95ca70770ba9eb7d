"""Type annotations as the data-model diagram writes them, and when two are the same type."""

from __future__ import annotations

import ast
import re

from scaffold.diagramcheck import python_model as pm
from scaffold.diagramcheck.rules.model import norm

# Type words a diagram need not repeat (``Optional[int]`` is drawn ``int?`` or ``int``).
_TYPE_NOISE = frozenset(
    {"Optional", "Union", "None", "typing", "t", "te", "typing_extensions", "Any", "builtins"}
)


MAX_DRAFT_FIELDS = 40


def type_words(type_text: str) -> tuple[str, ...]:
    found = re.findall(r"[A-Za-z_][A-Za-z0-9_]*", type_text)
    return tuple(dict.fromkeys(w for w in found if w not in _TYPE_NOISE))


def mermaid_type(type_text: str) -> str:
    """A field type spelled the way a Mermaid class diagram accepts (``list~str~``)."""
    text = type_text.replace(" ", "").replace(",...", "").replace("[", "~").replace("]", "~")
    return re.sub(r"[^\w~,|.?]", "", text)


def field_line(f: pm.FieldInfo) -> str:
    typ = mermaid_type(f.type)
    return f"+{typ} {f.name}" if typ else f"+{f.name}"


def class_draft(
    cls: pm.ClassInfo, kind: str, limit: int | None = MAX_DRAFT_FIELDS, stereotype: bool = False
) -> tuple[str, ...]:
    """``class X { ... }``: an Enum's members or the fields (the first ``limit``); with
    ``stereotype`` a kind other than dataclass is named (``<<pydantic model>>``)."""
    lines = [f"    class {cls.name} {{"]
    if kind == pm.ENUM:
        lines.append("        <<enumeration>>")
        lines += [f"        {m.value or m.name}" for m in cls.members[:limit]]
    else:
        if stereotype and kind != pm.DATACLASS:
            lines.append(f"        <<{kind}>>")
        lines += [f"        {field_line(f)}" for f in cls.fields[:limit]]
    lines.append("    }")
    return tuple(lines)


_BUILTIN_GENERICS = {
    "List": "list",
    "Dict": "dict",
    "Set": "set",
    "FrozenSet": "frozenset",
    "Tuple": "tuple",
    "Type": "type",
    "Text": "str",
}


def _canonical_type(node: ast.expr) -> str:
    """One spelling per type: ``Optional[int]``, ``Union[int, None]`` and ``int | None``
    agree, as do ``typing.List[str]`` and ``list[str]``."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return _canonical_type(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return node.value.replace(" ", "")
    members = _union_members(node)
    if members is not None:
        return "|".join(sorted(set(members)))
    if isinstance(node, ast.Subscript):
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        inner = ",".join(_canonical_type(a) for a in args)
        return f"{_canonical_type(node.value)}[{inner}]"
    if isinstance(node, ast.List | ast.Tuple):
        return "[" + ",".join(_canonical_type(e) for e in node.elts) + "]"
    text = ast.unparse(node).replace(" ", "")
    text = re.sub(r"^(?:typing|typing_extensions|t|te)\.", "", text)
    return _BUILTIN_GENERICS.get(text, text)


def _union_members(node: ast.expr) -> list[str] | None:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        left = _union_members(node.left) or [_canonical_type(node.left)]
        right = _union_members(node.right) or [_canonical_type(node.right)]
        return left + right
    if isinstance(node, ast.Subscript):
        head = _canonical_type(node.value)
        args = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        if head == "Optional" and len(args) == 1:
            return [*(_union_members(args[0]) or [_canonical_type(args[0])]), "None"]
        if head == "Union":
            out: list[str] = []
            for a in args:
                out += _union_members(a) or [_canonical_type(a)]
            return out
    return None


def same_type(a: str, b: str) -> bool:
    """Whether two annotations, as written, name the same type."""
    if norm(a) == norm(b):
        return True
    try:
        left = _canonical_type(ast.parse(a, mode="eval").body)
        right = _canonical_type(ast.parse(b, mode="eval").body)
    except (SyntaxError, ValueError, RecursionError):
        return False
    return left == right
