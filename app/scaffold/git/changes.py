"""The change list of a branch, one :class:`FileChange` per path: read from git by the
worktree adapter, judged without git by DiagramCheck."""

from __future__ import annotations

from dataclasses import dataclass

# Statuses git's --name-status can print (first letter only).
STATUSES = frozenset("ACDMRTUX")


@dataclass(frozen=True)
class FileChange:
    """One changed path, as ``git diff --name-status -M`` reports it: the status letter,
    the repository-relative path and, for ``R`` (renamed) and ``C`` (copied) only, the
    source path and the similarity percentage."""

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
    """Parse ``git diff --name-status -z`` output (NUL-separated, paths never quoted)."""
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
