"""What a Python file declares that the diagrams draw, and what kind each class is.

A :class:`ModuleInfo` (made by :func:`~scaffold.diagramcheck.python_reader.read_module`)
holds a file's classes with their bases, decorators, annotated fields and Enum-style
members, the ``State()`` attributes of python-statemachine classes, ``transitions``
``Machine(states=..., transitions=...)`` calls, transition tables (rows that name two
members of the same Enum: ``(state, event) -> state`` dicts, tuples or calls), and the
modules it imports.

Which classes are dataclasses, pydantic models, Enums and so on is decided by
:func:`classify` over all the modules of a diff at once, so a class whose base
is a pydantic model in another changed file is a pydantic model too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from scaffold.diagramcheck.python_syntax import last

# Kinds of class the data-model diagram draws.
DATACLASS = "dataclass"
PYDANTIC = "pydantic model"
ATTRS = "attrs class"
TYPEDDICT = "TypedDict"
NAMEDTUPLE = "NamedTuple"
SQLALCHEMY = "SQLAlchemy model"
ENUM = "Enum"
STATEMACHINE = "state machine"

# A declarative base (``class Base(DeclarativeBase)``): not a table itself.
_SQLA_BASE = "SQLAlchemy base"

DATA_KINDS = (DATACLASS, PYDANTIC, ATTRS, TYPEDDICT, NAMEDTUPLE, SQLALCHEMY, ENUM)

_ENUM_BASES = {"Enum", "IntEnum", "StrEnum", "Flag", "IntFlag", "ReprEnum"}

_PYDANTIC_BASES = {"BaseModel", "RootModel", "BaseSettings", "GenericModel"}

_SQLA_BASES = {"DeclarativeBase", "DeclarativeBaseNoMeta", "MappedAsDataclass"}

_SM_BASES = {"StateMachine", "StateChart"}

# Library classes whose shape their subclasses inherit, by the name they are imported as.
_LIBRARY_KINDS = {
    "pydantic.ConfigDict": "TypedDict",
    "pydantic.config.ConfigDict": "TypedDict",
    "pydantic_settings.SettingsConfigDict": "TypedDict",
    "pydantic_settings.main.SettingsConfigDict": "TypedDict",
    "pydantic_settings.BaseSettings": "pydantic model",
    "pydantic.BaseModel": "pydantic model",
    "typing.TypedDict": "TypedDict",
    "typing_extensions.TypedDict": "TypedDict",
}

_DATACLASS_DECOS = {"dataclass", "dataclasses.dataclass", "pydantic.dataclasses.dataclass"}

_ATTRS_DECOS = {
    "attr.s",
    "attr.attrs",
    "attr.define",
    "attr.frozen",
    "attr.mutable",
    "attr.dataclass",
    "attrs.define",
    "attrs.frozen",
    "attrs.mutable",
    "define",
    "frozen",
    "mutable",
    "attrs",
    "attributes",
}


@dataclass(frozen=True)
class FieldInfo:
    """A field: its name, its type as written (``""`` when untyped) and its line."""

    name: str
    type: str
    line: int


@dataclass(frozen=True)
class MemberInfo:
    """An Enum member or a state: its name, its string value if it has one, its line."""

    name: str
    value: str | None
    line: int

    @property
    def aliases(self) -> tuple[str, ...]:
        """The spellings a diagram may use: the name and the string value."""
        return (self.name, self.value) if self.value and self.value != self.name else (self.name,)


@dataclass(frozen=True)
class Transition:
    """One row of a transition table or machine: ``source --event--> target``."""

    source: str
    event: str
    target: str
    line: int


@dataclass(frozen=True)
class ClassInfo:
    """A class (or a functional TypedDict/NamedTuple) as written in the source."""

    name: str
    line: int
    bases: tuple[str, ...]
    decorators: tuple[str, ...]
    fields: tuple[FieldInfo, ...] = ()
    members: tuple[MemberInfo, ...] = ()
    states: tuple[MemberInfo, ...] = ()
    transitions: tuple[Transition, ...] = ()
    has_tablename: bool = False
    uses_mapped: bool = False
    functional_kind: str | None = None


@dataclass(frozen=True)
class TableInfo:
    """A transition table: an assignment whose rows name members of ``enum``."""

    name: str
    enum: str
    rows: tuple[Transition, ...]


@dataclass(frozen=True)
class MachineInfo:
    """A ``transitions`` machine: ``Machine(states=..., transitions=...)``."""

    name: str
    states: tuple[MemberInfo, ...]
    transitions: tuple[Transition, ...]


@dataclass(frozen=True)
class SyntaxProblem:
    line: int
    message: str


@dataclass(frozen=True)
class ModuleInfo:
    classes: tuple[ClassInfo, ...] = ()
    tables: tuple[TableInfo, ...] = ()
    machines: tuple[MachineInfo, ...] = ()
    imports: tuple[str, ...] = ()
    error: SyntaxProblem | None = None
    # Names bound to ``declarative_base()`` (the pre-2.0 SQLAlchemy spelling).
    declarative_bases: tuple[str, ...] = ()
    # Top-level ``from m import X`` bindings: local name -> ``m.X`` as written, a
    # relative module keeping its leading dots (``..base.Model``).
    imported: Mapping[str, str] = field(default_factory=dict)

    def class_named(self, name: str) -> ClassInfo | None:
        return next((cls for cls in self.classes if cls.name == name), None)


def state_enums(
    infos: Iterable[ModuleInfo], kinds: Iterable[tuple[str, str]], suffixes: Sequence[str]
) -> set[str]:
    """The Enums that hold states: keyed in a transition table, a machine's ``states=``,
    or named with one of ``suffixes`` (``kinds``: class name and kind pairs)."""
    found: set[str] = set()
    for info in infos:
        found.update(t.enum for t in info.tables)
        for machine in info.machines:
            found.update(
                s.name.removeprefix("@enum:") for s in machine.states if s.name.startswith("@enum:")
            )
    ends = tuple(suffixes)
    found.update(n for n, k in kinds if k == ENUM and ends and n.endswith(ends))
    return found


def _direct_kind(cls: ClassInfo) -> str | None:
    if cls.functional_kind:
        return cls.functional_kind
    for base in cls.bases:
        if base in _LIBRARY_KINDS:
            return _LIBRARY_KINDS[base]
    decos = set(cls.decorators)
    bases = {last(b) for b in cls.bases}
    for names, found, kind in (
        (decos, _DATACLASS_DECOS, DATACLASS),
        (decos, _ATTRS_DECOS, ATTRS),
        (bases, _SM_BASES, STATEMACHINE),
        (bases, _ENUM_BASES, ENUM),
        (bases, _PYDANTIC_BASES, PYDANTIC),
        (bases, {"TypedDict"}, TYPEDDICT),
        (bases, {"NamedTuple"}, NAMEDTUPLE),
        (bases, _SQLA_BASES, _SQLA_BASE),
    ):
        if names & found:
            return kind
    if cls.has_tablename or cls.uses_mapped:
        return SQLALCHEMY
    return None


def classify(classes: Iterable[ClassInfo], declarative_bases: Iterable[str] = ()) -> dict[str, str]:
    """The kind of every class name that has one, following bases transitively.

    ``declarative_bases`` are names bound by ``declarative_base()`` calls. A class
    deriving from a pydantic model, an Enum, a TypedDict, a state machine or a
    declarative base (anywhere in ``classes``) gets that kind; decorators
    (dataclass, attrs) are not inherited.
    """
    pool = list(classes)
    kinds: dict[str, str] = dict.fromkeys(declarative_bases, _SQLA_BASE)
    for cls in pool:
        kind = _direct_kind(cls)
        if kind is not None and kinds.get(cls.name) in (None, _SQLA_BASE):
            kinds[cls.name] = kind
    inheritable = {PYDANTIC, ENUM, TYPEDDICT, STATEMACHINE, _SQLA_BASE, SQLALCHEMY}
    changed = True
    while changed:
        changed = False
        for cls in pool:
            if cls.name in kinds and kinds[cls.name] != _SQLA_BASE:
                continue
            for base in cls.bases:
                inherited = kinds.get(last(base))
                if inherited in inheritable and base != cls.name:
                    new = SQLALCHEMY if inherited == _SQLA_BASE else inherited
                    if kinds.get(cls.name) != new:
                        kinds[cls.name] = new
                        changed = True
                    break
    return {name: kind for name, kind in kinds.items() if kind != _SQLA_BASE}
