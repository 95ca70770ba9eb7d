"""Shapes real projects have: inherited kinds, stubs, modules that become packages."""

from __future__ import annotations

import pytest
from dcrepo import ARCH, DATA, Repo, kinds, mermaid_doc

from scaffold.diagramcheck import python_model as pm
from scaffold.diagramcheck import python_reader
from scaffold.diagramcheck.analyzer import analyze

SETTINGS_V1 = (
    "from pydantic import ConfigDict\n\n\n"
    "class SettingsConfigDict(ConfigDict, total=False):\n    env_prefix: str\n"
)


def test_fields_of_a_typeddict_whose_base_is_a_library_class(repo: Repo) -> None:
    repo.write("app/pkg/main.py", SETTINGS_V1)
    repo.write(ARCH, mermaid_doc("flowchart LR\n    pkg.main"))
    repo.write(
        DATA, mermaid_doc("classDiagram\n    class SettingsConfigDict {\n    +env_prefix\n}")
    )
    repo.commit("settings")
    report = repo.change({"app/pkg/main.py": SETTINGS_V1 + "    cli_prog_name: str | None\n"})
    assert kinds(report) == [("field-added", "cli_prog_name")]


def test_a_base_class_from_an_unchanged_module_gives_its_kind(repo: Repo) -> None:
    repo.write("app/pkg/base.py", "from pydantic import BaseModel\n\n\nclass Model(BaseModel):\n")
    repo.write(
        "app/pkg/base.py", "import pydantic\n\n\nclass Model(pydantic.BaseModel):\n    pass\n"
    )
    repo.write("app/pkg/api/__init__.py", "from ..base import Model\n")
    repo.write("app/pkg/user.py", "from .api import Model\n\n\nclass User(Model):\n    id: int\n")
    repo.write(ARCH, mermaid_doc("flowchart LR\n    pkg.base\n    pkg.api\n    pkg.user"))
    repo.write(DATA, mermaid_doc("classDiagram\n    class User {\n    +int id\n}"))
    repo.commit("models")
    report = repo.change(
        {
            "app/pkg/user.py": "from .api import Model\n\n\nclass User(Model):\n    id: int\n    name: str\n"
        }
    )
    assert kinds(report) == [("field-added", "name")]


def test_a_stub_next_to_its_module_is_not_read_twice(repo: Repo) -> None:
    source = "from dataclasses import dataclass\n\n\n@dataclass\nclass Point:\n    x: int\n"
    repo.write("app/pkg/geo.py", source)
    repo.write("app/pkg/geo.pyi", "class Point:\n    x: int\n")
    repo.write(ARCH, mermaid_doc("flowchart LR\n    pkg.geo"))
    repo.commit("geo")
    report = repo.change(
        {
            "app/pkg/geo.py": source + "    y: int\n",
            "app/pkg/geo.pyi": "class Point:\n    x: int\n    y: int\n",
        }
    )
    assert kinds(report) == [("field-added", "y")]
    assert [f.source for f in report.failures] == ["app/pkg/geo.py"]


def test_a_stub_alone_is_read(repo: Repo) -> None:
    repo.write("app/pkg/native.pyi", "from typing import TypedDict\n\n\nclass Row(TypedDict):\n")
    report = repo.change(
        {
            "app/pkg/native.pyi": "from typing import TypedDict\n\n\nclass Row(TypedDict):\n    a: int\n"
        }
    )
    assert kinds(report) == [("class-added", "Row")]


def test_a_module_that_becomes_a_package_is_one_move(repo: Repo) -> None:
    repo.write("app/pkg/client.py", "def get() -> int:\n    return 1\n" * 3)
    repo.write(ARCH, mermaid_doc("flowchart LR\n    pkg.client"))
    base = repo.commit("client")
    repo.remove("app/pkg/client.py")
    repo.write("app/pkg/client/__init__.py", "from .core import *\n")
    repo.write("app/pkg/client/core.py", "def get() -> str:\n    return 'x'\n")
    repo.commit("package")
    report = repo.check(base)
    # The package keeps its name: only the new submodule needs the diagram.
    assert kinds(report) == [("module-added", "pkg.client.core")]
    repo.write(ARCH, mermaid_doc("flowchart LR\n    pkg.client\n    pkg.client.core"))
    repo.commit("diagram")
    assert not repo.check(base).blocking


def test_a_move_the_diagram_does_not_name_is_one_finding(repo: Repo) -> None:
    repo.write("app/pkg/client.py", "def get() -> int:\n    return 1\n" * 3)
    base = repo.commit("client")
    repo.remove("app/pkg/client.py")
    repo.write("app/pkg/client/__init__.py", "X = 1\n")
    repo.commit("package")
    report = repo.check(base)
    assert kinds(report) == [("module-moved", "pkg.client")]
    assert "moved from app/pkg/client.py" in report.failures[0].message


@pytest.mark.parametrize(
    ("before", "after", "same"),
    [
        ("typing.Optional[int]", "int | None", True),
        ("Union[str, None]", "None | str", True),
        ("List[Dict[str, Optional[int]]]", "list[dict[str, int | None]]", True),
        ("'Event'", "Event", True),
        ("str", "Event", False),
        ("list[int]", "list[str]", False),
        ("Optional[int]", "int", False),
    ],
)
def test_a_retype_is_a_new_type_not_a_new_spelling(before: str, after: str, same: bool) -> None:
    from scaffold.diagramcheck.rules.type_text import same_type

    assert same_type(before, after) is same


def test_the_sphinx_configuration_is_no_module(repo: Repo) -> None:
    report = repo.change({"docs/conf.py": "project = 'x'\n"})
    assert kinds(report) == []


def test_python_the_settings_leave_out_is_not_parsed(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    base = repo.head()
    repo.write("tests/test_big.py", "def test_x() -> None:\n    assert True\n")
    repo.write("app/pkg/real.py", "X = 1\n")
    repo.commit("code and tests")
    parsed: list[str] = []
    _count_parses(monkeypatch, parsed)
    report = analyze(repo.root, base)
    assert parsed == ["X = 1\n"]
    assert kinds(report) == [("module-added", "pkg.real")]


def _count_parses(monkeypatch: pytest.MonkeyPatch, parsed: list[str]) -> None:
    """Every blob parsed goes into ``parsed``."""
    real = python_reader.read_module

    def counting(source: str, *args: object, **kwargs: object) -> pm.ModuleInfo:
        parsed.append(source)
        return real(source, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(python_reader, "read_module", counting)
