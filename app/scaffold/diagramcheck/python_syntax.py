"""Python expressions as text: dotted names, annotations as written, string constants."""

from __future__ import annotations

import ast


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


def last(name: str) -> str:
    return name.rsplit(".", 1)[-1]


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


def annotation_text(node: ast.expr | None) -> str:
    if node is None:
        return ""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        text: str = node.value
        try:
            node = ast.parse(text, mode="eval").body
        except SyntaxError:
            return text
    # Mapped[int] -> int, Annotated[int, ...] -> int: the diagram shows the data type.
    while isinstance(node, ast.Subscript) and last(dotted(node.value)) in _WRAPPERS:
        inner = node.slice
        node = inner.elts[0] if isinstance(inner, ast.Tuple) and inner.elts else inner
    return plain_text(node) or ast.unparse(node)


def plain_text(node: ast.expr) -> str:
    """What ``ast.unparse`` writes for the usual annotations (``x.Y``, ``list[str]``,
    ``dict[str, int]``, ``int | None``), cheaply; ``""`` for anything else."""
    kind = type(node)
    if kind is ast.Name:
        return node.id  # type: ignore[attr-defined, no-any-return]
    if kind is ast.Attribute:
        if type(node.value) is ast.BinOp:  # type: ignore[attr-defined]
            return ""  # unparse brackets it
        inner = plain_text(node.value)  # type: ignore[attr-defined]
        return f"{inner}.{node.attr}" if inner else ""  # type: ignore[attr-defined]
    if kind is ast.Constant and node.value is None:  # type: ignore[attr-defined]
        return "None"
    if kind is ast.Subscript:
        if type(node.value) is ast.BinOp:  # type: ignore[attr-defined]
            return ""
        value = plain_text(node.value)  # type: ignore[attr-defined]
        index = node.slice  # type: ignore[attr-defined]
        if isinstance(index, ast.Tuple):
            items = [plain_text(e) for e in index.elts]
            inner = ", ".join(items) if items and all(items) else ""
        else:
            inner = plain_text(index)
        return f"{value}[{inner}]" if value and inner else ""
    if kind is ast.BinOp and isinstance(node.op, ast.BitOr):  # type: ignore[attr-defined]
        left = plain_text(node.left)  # type: ignore[attr-defined]
        right = plain_text(node.right)  # type: ignore[attr-defined]
        # unparse brackets a right-hand ``|`` (``a | (b | c)``): left to it.
        if left and right and not isinstance(node.right, ast.BinOp):  # type: ignore[attr-defined]
            return f"{left} | {right}"
    return ""


def is_classvar(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.startswith(("ClassVar", "typing.ClassVar"))
    return last(dotted(node)) == "ClassVar"


def str_value(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None
