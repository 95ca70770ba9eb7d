"""Globs, source roots and dotted module names."""

from __future__ import annotations

import pytest
from dcrepo import Repo, mermaid_doc

from scaffold.diagramcheck.paths import matches_any, module_name, normalize_path


@pytest.mark.parametrize(
    ("path", "patterns", "expected"),
    [
        ("tests/test_a.py", ("tests/**",), True),
        ("app/tests/x.py", ("**/tests/**",), True),
        ("app/deep/test_x.py", ("test_*.py",), True),
        ("app/x_test.py", ("test_*.py",), False),
        ("docs/a/b.md", ("docs",), True),
        ("src/gen/a_pb2.py", ("src/gen/*.py",), True),
        ("src/gen/sub/a_pb2.py", ("src/gen/*.py",), False),
        ("src/gen/sub/a_pb2.py", ("src/**/*_pb2.py",), True),
        ("./app//x.py", ("app/x.py",), True),
    ],
)
def test_matches_any(path: str, patterns: tuple[str, ...], expected: bool) -> None:
    assert matches_any(path, patterns) is expected


def test_module_names() -> None:
    packages = {"app/pkg/__init__.py", "app/pkg/sub/__init__.py", "src/demo/__init__.py"}
    assert module_name("app/pkg/sub/mod.py", (), packages) == "pkg.sub.mod"
    assert module_name("app/pkg/__init__.py", (), packages) == "pkg"
    assert module_name("src/demo/report.py", (), packages) == "demo.report"
    assert module_name("tools/build.py", (), packages) == "tools.build"
    assert module_name("check.py", (), packages) == "check"
    assert module_name("app/pkg/sub/mod.py", ("app",), packages) == "pkg.sub.mod"
    assert module_name("lib/x.py", ("app",), packages) is None
    assert module_name("app/pkg/not-a-name.py", (), packages) is None
    assert normalize_path("./docs//x.md") == "docs/x.md"


def test_configured_diagram_paths_are_normalised(repo: Repo) -> None:
    repo.write(".github/scaffold.yml", "diagrams:\n  architecture: ./design//arch.md\n")
    repo.write("design/arch.md", mermaid_doc("flowchart LR\n  app"))
    base = repo.commit("config")
    repo.write("app/pkg/mod.py", "")
    repo.commit("mod")
    [finding] = repo.check(base).failures
    assert finding.diagram == "design/arch.md"
    repo.write("design/arch.md", mermaid_doc("flowchart LR\n  app --> mod"))
    repo.commit("diagram")
    assert not repo.check(base).blocking
