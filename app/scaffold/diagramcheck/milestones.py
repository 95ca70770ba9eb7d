"""Backlog.md milestones: which ones a change adds or completes.

A milestone is a file in ``backlog/milestones/`` (``id``, ``title`` and, when
the project tracks it, ``status`` in its frontmatter); archiving it into
``backlog/archive/milestones/`` or giving it a done status completes it. Tasks
name their milestone in a ``milestone:`` field (its id or its title); a change
that leaves every task of a milestone Done (or in ``backlog/completed/``) while
it moved at least one of them there completes the milestone too.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scaffold.errors import BacklogError

BACKLOG_DIRS = ("backlog", ".backlog")
DONE_STATUSES = frozenset({"done", "completed", "complete", "closed", "finished"})


@dataclass(frozen=True)
class BacklogEntry:
    """The frontmatter fields DiagramCheck reads from a task or milestone file."""

    path: str
    id: str | None
    title: str | None
    status: str | None
    milestone: str | None

    @property
    def done(self) -> bool:
        if self.status is not None and self.status.strip().lower() in DONE_STATUSES:
            return True
        parts = self.path.split("/")
        return len(parts) >= 2 and parts[-2] == "completed"

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(n for n in (self.title, self.id) if n)


def backlog_kind(path: str) -> str | None:
    """``"milestone"``, ``"archived-milestone"`` or ``"task"`` for a Backlog.md file."""
    parts = path.split("/")
    if len(parts) < 3 or parts[0] not in BACKLOG_DIRS or not path.endswith(".md"):
        return None
    if parts[1] == "milestones" and len(parts) == 3:
        return "milestone"
    if parts[1] == "archive" and parts[2] == "milestones" and len(parts) == 4:
        return "archived-milestone"
    if parts[1] in ("tasks", "completed") and len(parts) == 3:
        return "task"
    return None


def read_entry(path: str, text: str | None) -> BacklogEntry | None:
    """The fields of one file; ``None`` when it has no text or no readable frontmatter."""
    if text is None:
        return None
    # The Backlog.md reader (YAML) loads only when a task or milestone changed.
    from scaffold.backlog.format import load_yaml_mapping, scalar_text
    from scaffold.backlog.frontmatter import split_document

    try:
        doc = split_document(text, path)
        data: Mapping[str, object] = load_yaml_mapping(doc.yaml, path)
    except BacklogError:
        return None
    return BacklogEntry(
        path=path,
        id=scalar_text(data.get("id")),
        title=scalar_text(data.get("title")),
        status=scalar_text(data.get("status")),
        milestone=scalar_text(data.get("milestone")),
    )
