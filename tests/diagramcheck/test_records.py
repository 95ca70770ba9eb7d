"""quick_init: the same frozen dataclass, built faster."""

from __future__ import annotations

import dataclasses
import pickle
from dataclasses import dataclass, field

import pytest

from scaffold.diagramcheck import findings, git_diff, python_model, rules
from scaffold.diagramcheck.records import quick_init


@dataclass(frozen=True)
class Plain:
    a: str
    b: int = 2
    c: tuple[str, ...] = ()
    d: dict[str, int] = field(default_factory=dict)
    e: str = field(default="e", kw_only=True)


@quick_init
@dataclass(frozen=True)
class Quick:
    a: str
    b: int = 2
    c: tuple[str, ...] = ()
    d: dict[str, int] = field(default_factory=dict)
    e: str = field(default="e", kw_only=True)


def _values(obj: object) -> tuple[object, ...]:
    return tuple(getattr(obj, f.name) for f in dataclasses.fields(obj))  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("args", "kwargs"),
    [
        (("x",), {}),
        (("x", 5), {}),
        (("x", 5, ("y",), {"k": 1}), {"e": "f"}),
        ((), {"a": "x", "d": {"k": 2}}),
    ],
)
def test_the_same_fields_as_the_generated_init(
    args: tuple[object, ...], kwargs: dict[str, object]
) -> None:
    quick = Quick(*args, **kwargs)  # type: ignore[arg-type]
    assert _values(quick) == _values(Plain(*args, **kwargs))  # type: ignore[arg-type]
    assert quick == Quick(*args, **kwargs)  # type: ignore[arg-type]
    with pytest.raises(TypeError):  # a dict field: unhashable, like the dataclass
        hash(Plain("x"))
    with pytest.raises(TypeError):
        hash(Quick("x"))
    assert hash(Quick("x", d=None)) == hash(Quick("x", d=None))  # type: ignore[arg-type]
    assert repr(Quick("x")) == repr(Plain("x")).replace("Plain", "Quick")


def test_still_frozen_replaceable_picklable_and_checked() -> None:
    quick = Quick("x")
    with pytest.raises(dataclasses.FrozenInstanceError):
        quick.a = "y"  # type: ignore[misc]
    assert dataclasses.replace(quick, b=3) == Quick("x", 3)
    assert pickle.loads(pickle.dumps(quick)) == quick
    assert Quick("x").d is not Quick("x").d  # a fresh default each time
    with pytest.raises(TypeError):
        Quick()  # type: ignore[call-arg]
    with pytest.raises(TypeError):
        Quick("x", 1, (), {}, "e")  # type: ignore[misc]  # e is keyword-only


def test_only_plain_frozen_dataclasses() -> None:
    @dataclass
    class Mutable:
        a: int

    with pytest.raises(TypeError):
        quick_init(Mutable)


@pytest.mark.parametrize(
    "cls",
    [
        findings.Finding,
        git_diff.RawChange,
        python_model.ClassInfo,
        python_model.FieldInfo,
        python_model.MemberInfo,
        python_model.ModuleInfo,
        rules.Requirement,
        rules.SourceChange,
    ],
)
def test_diagramcheck_records_build_like_dataclasses(cls: type) -> None:
    """Each quick class's __init__ fills every field, defaults included."""
    required = [
        f
        for f in dataclasses.fields(cls)
        if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
    ]
    obj = cls(*(f"v{i}" for i in range(len(required))))
    assert set(vars(obj)) == {f.name for f in dataclasses.fields(cls)}
    assert dataclasses.replace(obj) == obj
    assert pickle.loads(pickle.dumps(obj)) == obj
