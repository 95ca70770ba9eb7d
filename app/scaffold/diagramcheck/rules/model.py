"""What the rules read (the changed files, the diagrams) and what they require."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

from scaffold.diagramcheck import mermaid
from scaffold.diagramcheck import python_model as pm
from scaffold.diagramcheck.milestones import BacklogEntry

Side = Literal["old", "new"]


Match = Literal["name", "state", "edge", "text"]


@dataclass(frozen=True)
class SourceChange:
    """A changed file the rules read: its old and new text (``None`` where absent).

    ``old_binary``/``new_binary`` mark a side that is binary or not UTF-8.
    """

    status: str
    path: str
    old_path: str | None = None
    old_text: str | None = None
    new_text: str | None = None
    old_binary: bool = False
    new_binary: bool = False

    @property
    def source_path(self) -> str:
        return self.old_path if self.old_path is not None else self.path


@dataclass(frozen=True)
class DiagramFile:
    """A configured diagram at the head: its text (``None`` if absent), changed or not."""

    path: str
    text: str | None
    changed: bool


def read_diagram(dfile: DiagramFile) -> tuple[mermaid.DiagramIndex, str]:
    """What a diagram file names, and the text of its Mermaid blocks."""
    blocks = mermaid.extract_blocks(dfile.text or "", dfile.path)
    return mermaid.index_blocks(blocks), "\n".join(b.source for b in blocks)


@dataclass(frozen=True)
class DiffInput:
    """Everything the rules need, read from git by the analyzer."""

    changes: tuple[SourceChange, ...]
    diagrams: Mapping[str, DiagramFile]
    # A module of the repository by dotted name on one side, parsed (None when the
    # repository has no such module): where a changed class's bases are looked up.
    lookup: Callable[[Side, str], pm.ModuleInfo | None]
    packages_old: frozenset[str] = frozenset()
    packages_new: frozenset[str] = frozenset()
    # Backlog.md at the head, read only when a task changed: every task and milestone.
    head_tasks: tuple[BacklogEntry, ...] = ()
    head_milestones: tuple[BacklogEntry, ...] = ()
    # Every ``.py``/``.pyi`` path of the merge base and of the head (a stub whose
    # module is there describes that module and is not read twice).
    python_old: frozenset[str] = frozenset()
    python_new: frozenset[str] = frozenset()


@dataclass(frozen=True)
class Requirement:
    """``diagram`` must name one of ``accept`` (or, with ``remove``, none of them).

    ``scope`` confines the search to a class's body when the diagram draws one;
    ``also`` lists words that must appear there too (a retyped field's type).
    ``match`` is ``state`` for state names (compared loosely: case, ``_`` and
    ``-`` ignored), ``edge`` for a transition ``accept -> target``, ``text`` for
    titles searched in the Mermaid text.
    """

    kind: str
    diagram: str
    source: str
    line: int
    name: str
    what: str
    accept: tuple[str, ...]
    remove: bool = False
    scope: str | None = None
    also: tuple[str, ...] = ()
    match: Match = "name"
    target: tuple[str, ...] = ()
    draft: tuple[str, ...] = ()
    # False: met when the diagram names it, changed in this diff or not (a move
    # that keeps the name asks nothing new of an up-to-date diagram).
    needs_change: bool = True


@dataclass(frozen=True)
class Analysis:
    """The parsed modules of a diff, both sides."""

    pairs: list[tuple[SourceChange, pm.ModuleInfo | None, pm.ModuleInfo | None]]
    kinds_old: dict[str, str]
    kinds_new: dict[str, str]
    state_enums: set[str]


def mermaid_id(name: str) -> str:
    """``name`` as a Mermaid id (the start/end state ``[*]`` stays as it is)."""
    return name if name == "[*]" else re.sub(r"\W", "_", name)


def norm(name: str) -> str:
    return re.sub(r"[_\-\s]", "", name).lower()


def is_python(path: str) -> bool:
    return path.endswith((".py", ".pyi"))
