"""DiagramCheck: which diagrams a change list requires, and whether it has them.

An open rule engine. A rule is any callable ``(changes, config) ->
[DiagramRequirement]`` naming the diagram a change requires; the engine
(:func:`check_diagrams`) decides which requirements the same change list
already satisfies. Rules are pure: they read the change list, never git or
the disk, so they are trivial to test and to run on a PR's file list from
the forge as well as on a local branch.

The first rule (seed 004, "Detect new Python modules/packages -> Check if
architecture diagram updated"): a change that adds a Python module requires
the architecture diagram to change in the same diff.
"""

from __future__ import annotations

import fnmatch
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import PurePosixPath
from typing import Protocol

from scaffold.git.changes import FileChange

DIAGRAMS_DIR = "docs/diagrams"


@dataclass(frozen=True)
class DiagramPaths:
    """The file each kind of change requires (config key ``diagrams``)."""

    architecture: str = f"{DIAGRAMS_DIR}/02-architecture.md"
    data_model: str = f"{DIAGRAMS_DIR}/05-data-model.md"
    states: str = f"{DIAGRAMS_DIR}/03-state-machine.md"
    roadmap: str = f"{DIAGRAMS_DIR}/04-roadmap.md"


@dataclass(frozen=True)
class DiagramRequirement:
    """``diagram_path`` must change because of ``source_path``; ``reason`` says why."""

    diagram_path: str
    reason: str
    source_path: str


@dataclass(frozen=True)
class DiagramVerdict:
    """``synced`` when no requirement is missing; ``missing`` lists the rest."""

    synced: bool
    missing: list[DiagramRequirement]


class Rule(Protocol):
    def __call__(
        self, changes: Sequence[FileChange], config: DiagramPaths
    ) -> list[DiagramRequirement]: ...


def normalize_path(path: str) -> str:
    """``./docs//x.md`` -> ``docs/x.md``: the form git prints paths in."""
    parts = [p for p in PurePosixPath(path.replace("\\", "/")).parts if p not in (".", "")]
    return "/".join(parts)


@dataclass(frozen=True)
class NewModuleRule:
    """A new Python module requires the architecture diagram.

    "New" is status ``A`` (added) or ``C`` (copied), and ``R`` (renamed): a
    rename moves a module to a new import path, which is what the diagram
    shows. Deleting a module, or renaming it into an excluded place, requires
    nothing from this rule. Test code is not architecture: files under a
    folder named in ``exclude_dirs`` (any depth) or named like a test module
    (``exclude_names``) are skipped.
    """

    exclude_dirs: tuple[str, ...] = ("tests", "test")
    exclude_names: tuple[str, ...] = ("test_*.py", "*_test.py", "conftest.py")
    suffixes: tuple[str, ...] = (".py",)

    def is_module(self, path: str) -> bool:
        p = PurePosixPath(normalize_path(path))
        if p.suffix not in self.suffixes:
            return False
        if any(part in self.exclude_dirs for part in p.parts[:-1]):
            return False
        return not any(fnmatch.fnmatchcase(p.name, pat) for pat in self.exclude_names)

    def __call__(
        self, changes: Sequence[FileChange], config: DiagramPaths
    ) -> list[DiagramRequirement]:
        found: list[DiagramRequirement] = []
        for change in changes:
            if change.status not in ("A", "C", "R") or not self.is_module(change.path):
                continue
            if change.status == "R" and change.old_path is not None:
                reason = f"Python module moved from {change.old_path} to {change.path}"
            else:
                reason = f"new Python module {change.path}"
            found.append(
                DiagramRequirement(normalize_path(config.architecture), reason, change.path)
            )
        return found


DEFAULT_RULES: tuple[Rule, ...] = (NewModuleRule(),)


def changed_paths(changes: Sequence[FileChange]) -> set[str]:
    """Paths whose content is present and changed in the diff (deletions excluded)."""
    return {normalize_path(c.path) for c in changes if c.status != "D"}


def check_diagrams(
    changes: Sequence[FileChange],
    config: DiagramPaths | None = None,
    rules: Sequence[Rule] = DEFAULT_RULES,
) -> DiagramVerdict:
    """Apply ``rules`` and keep the requirements the same diff does not satisfy.

    A requirement is satisfied when its diagram file is added, modified,
    renamed or copied into place in ``changes``. Duplicate requirements are
    reported once, in the order the rules produced them.
    """
    paths = config if config is not None else DiagramPaths()
    present = changed_paths(changes)
    missing: list[DiagramRequirement] = []
    seen: set[DiagramRequirement] = set()
    for rule in rules:
        for req in rule(changes, paths):
            if normalize_path(req.diagram_path) in present or req in seen:
                continue
            seen.add(req)
            missing.append(req)
    return DiagramVerdict(synced=not missing, missing=missing)
