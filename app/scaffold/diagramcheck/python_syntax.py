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


def resolve_relative(ref: str, module: str, is_package: bool) -> str:
    """``..base.Model`` seen from ``module`` -> ``pkg.base.Model``."""
    level = len(ref) - len(ref.lstrip("."))
    parts = module.split(".") if module else []
    keep = len(parts) - level + (1 if is_package else 0)
    prefix = ".".join(parts[: max(keep, 0)])
    rest = ref[level:]
    return f"{prefix}.{rest}".strip(".") if prefix else rest


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
    return ast.unparse(node)


def is_classvar(node: ast.expr) -> bool:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value.startswith(("ClassVar", "typing.ClassVar"))
    return last(dotted(node)) == "ClassVar"


def str_value(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None
