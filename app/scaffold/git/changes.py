"""The change list of a branch: one :class:`FileChange` per path.

Shared by the worktree adapter (which reads it from git) and DiagramCheck
(which judges it without touching git), so the rules stay pure functions.
"""

from __future__ import annotations

from dataclasses import dataclass

# Statuses git's --name-status can print (first letter only).
STATUSES = frozenset("ACDMRTUX")


@dataclass(frozen=True)
class FileChange:
    """One changed path, as ``git diff --name-status -M`` reports it.

    ``status`` is the single letter (``A`` added, ``M`` modified, ``D``
    deleted, ``R`` renamed, ``C`` copied, ``T`` type changed). For ``R`` and
    ``C`` ``path`` is the new path, ``old_path`` the source and
    ``similarity`` the percentage git printed; otherwise both are ``None``.
    Paths are repository-relative, ``/``-separated, exactly as git prints them.
    """

    status: str
    path: str
    old_path: str | None = None
    similarity: int | None = None

    def __post_init__(self) -> None:
        if self.status not in STATUSES:
            raise ValueError(f"unknown change status {self.status!r}")
        if not self.path:
            raise ValueError("a change needs a path")


def parse_name_status_z(output: str) -> list[FileChange]:
    """Parse ``git diff --name-status -z`` output.

    With ``-z`` git separates fields by NUL and never quotes paths, so any
    file name (spaces, newlines, non-ASCII) comes through unchanged.
    """
    fields = output.split("\0")
    if fields and fields[-1] == "":
        fields.pop()
    changes: list[FileChange] = []
    i = 0
    while i < len(fields):
        raw = fields[i]
        if not raw:
            raise ValueError(f"empty status field at position {i}")
        letter, score = raw[0], raw[1:]
        if letter in ("R", "C"):
            if i + 2 >= len(fields):
                raise ValueError(f"truncated {letter} record")
            changes.append(
                FileChange(
                    letter,
                    fields[i + 2],
                    old_path=fields[i + 1],
                    similarity=int(score) if score.isdigit() else None,
                )
            )
            i += 3
        else:
            if i + 1 >= len(fields):
                raise ValueError(f"truncated {letter} record")
            changes.append(FileChange(letter, fields[i + 1]))
            i += 2
    return changes
