"""Reading declarations with ast: kinds, fields, members, tables, machines."""

from __future__ import annotations

from scaffold.diagramcheck import python_model as pm
from scaffold.diagramcheck import python_reader


def _kinds(source: str) -> dict[str, str]:
    info = python_reader.read_module(source)
    return pm.classify(info.classes, info.declarative_bases)


def test_kinds() -> None:
    source = """
import attr, enum, typing
from dataclasses import dataclass as dc
from sqlalchemy.orm import declarative_base
from sqlalchemy import Column, Integer

Base = declarative_base()

@dc(frozen=True)
class A: x: int

@attr.s
class B:
    y = attr.ib(type=int)

class C(typing.NamedTuple): z: int

class D(enum.IntEnum):
    ONE = 1

class E(Base):
    __tablename__ = "e"
    id = Column(Integer, primary_key=True)

class F(D): pass

class Plain: w: int
"""
    kinds = _kinds(source)
    assert kinds == {
        "A": pm.DATACLASS,
        "B": pm.ATTRS,
        "C": pm.NAMEDTUPLE,
        "D": pm.ENUM,
        "E": pm.SQLALCHEMY,
        "F": pm.ENUM,
    }
    info = python_reader.read_module(source)
    fields = {c.name: [(f.name, f.type) for f in c.fields] for c in info.classes}
    assert fields["B"] == [("y", "int")]
    assert fields["E"] == [("id", "Integer")]


def test_fields_skip_classvars_and_unwrap_annotations() -> None:
    info = python_reader.read_module(
        "from typing import Annotated, ClassVar\nfrom pydantic import BaseModel, ConfigDict\n"
        "class M(BaseModel):\n    model_config = ConfigDict()\n    count: ClassVar[int] = 0\n"
        "    name: Annotated[str, 'meta']\n    when: 'datetime | None' = None\n"
    )
    [cls] = info.classes
    assert [(f.name, f.type) for f in cls.fields] == [("name", "str"), ("when", "datetime | None")]


def test_relative_imports() -> None:
    info = python_reader.read_module(
        "from . import a\nfrom ..b import c\nimport x.y\n", "pkg.sub.mod", imports=True
    )
    assert set(info.imports) >= {"pkg.sub", "pkg.sub.a", "pkg.b", "pkg.b.c", "x.y"}


def test_syntax_error_is_data() -> None:
    info = python_reader.read_module("class (:\n")
    assert info.error is not None
    assert info.error.line == 1
    assert info.classes == ()


def test_table_built_inside_a_function() -> None:
    info = python_reader.read_module(
        "from states import Phase as S, Ev as E\n\n\ndef _rows():\n    t = Row\n"
        "    rows = [\n        t('go', S.IDLE, E.GO, S.BUSY),\n        t('done', S.BUSY, E.END, S.IDLE),\n"
        "    ]\n    return rows\n"
    )
    [table] = info.tables
    assert (table.name, table.enum) == ("_rows.rows", "Phase")
    assert [(r.source, r.event, r.target, r.line) for r in table.rows] == [
        ("IDLE", "GO", "BUSY", 7),
        ("BUSY", "END", "IDLE", 8),
    ]
