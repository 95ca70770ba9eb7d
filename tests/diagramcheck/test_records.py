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


def test_rows_and_back() -> None:
    from scaffold.diagramcheck.records import records, rows

    reqs = [
        rules.Requirement("field-added", "d.md", "a.py", 3, "x", "field x", ("x",), also=("int",)),
        rules.Requirement("class-removed", "d.md", "b.py", 1, "B", "B", ("B",), remove=True),
    ]
    assert records(rules.Requirement, rows(reqs)) == reqs
    assert records(rules.Requirement, "not a list") is None
    assert records(rules.Requirement, [("too", "few")]) is None
    assert records(rules.Requirement, [None]) is None


def test_damaged_result_rows_are_a_miss() -> None:
    from scaffold.diagramcheck.cache import ParseCache

    cache = ParseCache(None)
    finding = findings.Finding("k", "d.md", "a.py", 1, "n", "message", draft=("x",))
    req = rules.Requirement("field-added", "d.md", "a.py", 3, "x", "field x", ("x",))
    cache.put_result("r", ([req], [finding]))
    cache.put_report("p", ([finding], ["d.md"]))
    assert cache.get_result("r") == ([req], [finding])
    assert cache.get_report("p") == ([finding], ["d.md"])
    good = cache.results["r"]
    for damaged in (good[:-3], good[:8] + b"\xff" * 20, b"", b"junk", good[:10]):
        cache.results["r"] = damaged
        assert cache.get_result("r") is None
    assert cache.get_report("r") is None  # rows of the wrong shape
