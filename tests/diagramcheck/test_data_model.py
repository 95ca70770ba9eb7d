"""Data classes of every flavour -> the data-model diagram (real git repositories)."""

from __future__ import annotations

import pytest
from dcrepo import ARCH, DATA, Repo, kinds, mermaid_doc

KINDS = {
    "dataclass": (
        "from dataclasses import dataclass\n\n\n@dataclass\nclass User:\n{fields}",
        "",
    ),
    "pydantic": ("from pydantic import BaseModel\n\n\nclass User(BaseModel):\n{fields}", ""),
    "attrs": ("import attrs\n\n\n@attrs.define\nclass User:\n{fields}", ""),
    "typeddict": ("from typing import TypedDict\n\n\nclass User(TypedDict):\n{fields}", ""),
    "namedtuple": ("from typing import NamedTuple\n\n\nclass User(NamedTuple):\n{fields}", ""),
    "sqlalchemy": (
        "from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column\n\n\n"
        "class Base(DeclarativeBase):\n    pass\n\n\n"
        "class User(Base):\n    __tablename__ = 'users'\n{fields}",
        "Mapped",
    ),
}


def _fields(flavour: str, fields: dict[str, str]) -> str:
    wrap = KINDS[flavour][1]
    lines = []
    for name, typ in fields.items():
        if wrap:
            lines.append(f"    {name}: {wrap}[{typ}] = mapped_column()\n")
        else:
            lines.append(f"    {name}: {typ}\n")
    return "".join(lines)


def _source(flavour: str, fields: dict[str, str]) -> str:
    return KINDS[flavour][0].format(fields=_fields(flavour, fields))


def _start(repo: Repo, flavour: str) -> str:
    repo.write("app/pkg/models.py", _source(flavour, {"id": "int", "email": "str"}))
    repo.write(ARCH, mermaid_doc("flowchart LR\n    pkg.models"))
    repo.write(
        DATA,
        mermaid_doc("classDiagram\n    class User {\n        +int id\n        +str email\n    }"),
    )
    return repo.commit("models")


@pytest.mark.parametrize("flavour", sorted(KINDS))
def test_new_class_needs_the_data_model(repo: Repo, flavour: str) -> None:
    report = repo.change(
        {
            "app/pkg/models.py": _source(flavour, {"id": "int", "email": "str"}),
            ARCH: mermaid_doc("flowchart LR\n    pkg.models"),
        }
    )
    assert kinds(report) == [("class-added", "User")]
    [finding] = report.failures
    assert finding.diagram == DATA
    assert (
        finding.line
        == _source(flavour, {})
        .splitlines()
        .index(next(line for line in _source(flavour, {}).splitlines() if "class User" in line))
        + 1
    )
    assert "+int id" in " ".join(finding.draft)


@pytest.mark.parametrize("flavour", sorted(KINDS))
def test_field_added_renamed_retyped(repo: Repo, flavour: str) -> None:
    base = _start(repo, flavour)
    # Added.
    repo.write("app/pkg/models.py", _source(flavour, {"id": "int", "email": "str", "age": "int"}))
    repo.commit("age")
    report = repo.check(base)
    assert kinds(report) == [("field-added", "age")]
    assert (
        report.failures[0].line
        == _source(flavour, {"id": "int", "email": "str", "age": "int"})
        .splitlines()
        .index(next(x for x in _fields(flavour, {"age": "int"}).splitlines()))
        + 1
    )
    repo.write(
        DATA, mermaid_doc("classDiagram\n    class User {\n  +int id\n  +str email\n  +int age\n}")
    )
    repo.commit("diagram")
    assert not repo.check(base).blocking

    # Renamed: the new name in, the old name out.
    base = repo.head()
    repo.write("app/pkg/models.py", _source(flavour, {"id": "int", "mail": "str", "age": "int"}))
    repo.write(
        DATA,
        mermaid_doc(
            "classDiagram\n    class User {\n  +int id\n  +str email\n  +int age\n  +str mail\n}"
        ),
    )
    repo.commit("rename")
    report = repo.check(base)
    assert [(f.kind, f.name) for f in report.failures] == [("field-renamed", "email")]
    assert report.failures[0].message.startswith("remove field `email`")
    repo.write(
        DATA, mermaid_doc("classDiagram\n    class User {\n  +int id\n  +int age\n  +str mail\n}")
    )
    repo.commit("fix")
    assert not repo.check(base).blocking

    # Retyped: the diagram must show the new type on the class.
    base = repo.head()
    repo.write("app/pkg/models.py", _source(flavour, {"id": "UUID", "mail": "str", "age": "int"}))
    repo.write(
        DATA,
        mermaid_doc(
            "classDiagram\n    class User {\n  +int id\n  +int age\n  +str mail\n}\n  %% touched"
        ),
    )
    repo.commit("retype")
    report = repo.check(base)
    assert kinds(report) == [("field-retyped", "id")]
    assert "retyped from `int` to `UUID`" in report.failures[0].message
    repo.write(
        DATA, mermaid_doc("classDiagram\n    class User {\n  +UUID id\n  +int age\n  +str mail\n}")
    )
    repo.commit("fix")
    assert not repo.check(base).blocking


def test_field_removed_must_leave_the_class(repo: Repo) -> None:
    base = _start(repo, "dataclass")
    repo.write("app/pkg/models.py", _source("dataclass", {"id": "int"}))
    repo.commit("drop email")
    report = repo.check(base)
    assert kinds(report) == [("field-removed", "email")]
    assert report.failures[0].message == f"remove field `email` of dataclass `User` from {DATA}"
    # Another class may keep a field of the same name.
    repo.write(
        DATA,
        mermaid_doc("classDiagram\n  class User {\n  +int id\n}\n  class Other {\n  +str email\n}"),
    )
    repo.commit("diagram")
    assert not repo.check(base).blocking


def test_pydantic_subclass_in_another_changed_file(repo: Repo) -> None:
    report = repo.change(
        {
            "app/pkg/base.py": "from pydantic import BaseModel\n\n\nclass Record(BaseModel):\n    id: int\n",
            "app/pkg/things.py": "from pkg.base import Record\n\n\nclass Thing(Record):\n    name: str\n",
            ARCH: mermaid_doc("flowchart LR\n  pkg.base\n  pkg.things"),
        }
    )
    assert kinds(report) == [("class-added", "Record"), ("class-added", "Thing")]


def test_enum_members_added_removed(repo: Repo) -> None:
    repo.write(
        "app/pkg/colors.py",
        "from enum import Enum\n\n\nclass Color(Enum):\n    RED = 'red'\n    BLUE = 'blue'\n",
    )
    repo.write(ARCH, mermaid_doc("flowchart LR\n  pkg.colors"))
    repo.write(
        DATA, mermaid_doc("classDiagram\n  class Color {\n  <<enumeration>>\n  red\n  blue\n}")
    )
    base = repo.commit("enum")
    repo.write(
        "app/pkg/colors.py",
        "from enum import Enum\n\n\nclass Color(Enum):\n    RED = 'red'\n    GREEN = 'green'\n",
    )
    repo.commit("green")
    report = repo.check(base)
    assert kinds(report) == [("member-added", "GREEN"), ("member-removed", "BLUE")]
    repo.write(
        DATA, mermaid_doc("classDiagram\n  class Color {\n  <<enumeration>>\n  red\n  green\n}")
    )
    repo.commit("diagram")
    assert not repo.check(base).blocking


def test_functional_typeddict_and_namedtuple(repo: Repo) -> None:
    report = repo.change(
        {
            "app/pkg/shapes.py": (
                "from collections import namedtuple\nfrom typing import TypedDict\n\n"
                "Point = namedtuple('Point', 'x y')\n"
                "Movie = TypedDict('Movie', {'title': str, 'year': int})\n"
            ),
            ARCH: mermaid_doc("flowchart LR\n  pkg.shapes"),
        }
    )
    assert kinds(report) == [("class-added", "Movie"), ("class-added", "Point")]


def test_data_model_sources_restrict_the_rule(repo: Repo) -> None:
    repo.write(".github/scaffold.yml", "diagrams:\n  data_model_sources: ['app/pkg/model/**']\n")
    repo.commit("config")
    report = repo.change(
        {
            "app/pkg/internal.py": "from dataclasses import dataclass\n\n\n@dataclass\nclass Cache:\n    n: int\n",
            ARCH: mermaid_doc("flowchart LR\n  pkg.internal"),
        }
    )
    assert report.findings == ()


def test_plain_and_private_classes_need_nothing(repo: Repo) -> None:
    report = repo.change(
        {
            "app/pkg/plain.py": (
                "from dataclasses import dataclass\n\n\nclass Service:\n    x: int\n\n\n"
                "@dataclass\nclass _Scratch:\n    y: int\n"
            ),
            ARCH: mermaid_doc("flowchart LR\n  pkg.plain"),
        }
    )
    assert report.findings == ()


def test_enum_member_renamed_keeps_its_value(repo: Repo) -> None:
    repo.write(
        "app/pkg/level.py", "from enum import Enum\n\n\nclass Level(Enum):\n    LOW = 'low'\n"
    )
    repo.write(ARCH, mermaid_doc("flowchart LR\n  pkg.level"))
    repo.write(DATA, mermaid_doc("classDiagram\n  class Level {\n  LOW\n}"))
    base = repo.commit("level")
    repo.write(
        "app/pkg/level.py", "from enum import Enum\n\n\nclass Level(Enum):\n    MINOR = 'low'\n"
    )
    repo.write(DATA, mermaid_doc("classDiagram\n  class Level {\n  MINOR\n  LOW\n}"))
    repo.commit("rename")
    report = repo.check(base)
    assert kinds(report) == [("member-removed", "LOW")]
    repo.write(DATA, mermaid_doc("classDiagram\n  class Level {\n  MINOR\n}"))
    repo.commit("fix")
    assert not repo.check(base).blocking
