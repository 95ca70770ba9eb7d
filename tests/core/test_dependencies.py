"""The runtime dependencies are exactly what the product imports.

A library declared but never imported (GitPython was) costs every install for
nothing; one imported but not declared breaks a clean install. Test-only libraries
(PyGithub checks the GitHub simulator) belong to the ``test`` extra.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from importlib.metadata import packages_distributions
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _name(requirement: str) -> str:
    bare = re.split(r"[<>=!~;\[ ]", requirement, maxsplit=1)[0]
    return re.sub(r"[-_.]+", "-", bare).lower()


def _declared() -> set[str]:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text("utf-8"))["project"]
    return {_name(r) for r in project["dependencies"]}


def _imported_distributions() -> set[str]:
    modules: set[str] = set()
    for path in (ROOT / "app" / "scaffold").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text("utf-8"))):
            if isinstance(node, ast.Import):
                modules |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                modules.add(node.module.split(".")[0])
    third_party = modules - set(sys.stdlib_module_names) - {"scaffold"}
    owners = packages_distributions()
    dists = {_name(d) for m in third_party for d in owners.get(m, [m])}
    # pydantic-core is pydantic's own half, pinned exactly by it: pydantic declares it.
    return {"pydantic" if d == "pydantic-core" else d for d in dists}


def test_every_runtime_dependency_is_imported_and_every_import_declared() -> None:
    declared = _declared()
    imported = _imported_distributions()
    assert declared - imported == set(), "declared but never imported by app/scaffold"
    assert imported - declared == set(), "imported by app/scaffold but not declared"
    assert "gitpython" not in declared
    assert "pygithub" not in declared
