"""What ties a quest to GitHub (repository, issue, comments, PRs): one small JSON file per
quest, owned by the App, written atomically under the repository's one lock, so two
changes made at once both land.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from scaffold.errors import StoreError
from scaffold.fsutil import write_file
from scaffold.ids import validate_quest_id


class QuestLink(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    quest_id: str
    repo: str
    issue_number: int
    installation_id: int
    requested_by: str
    status_comment_id: int | None = None
    # question id -> the comment that asked it
    question_comments: dict[str, int] = {}
    # task id -> the number of the pull request scaffold opened for it (recorded as soon
    # as it exists, before the quest file knows it)
    pull_requests: dict[str, int] = {}
    active: bool = True


_LOCKS: dict[str, threading.RLock] = {}
_LOCKS_GUARD = threading.Lock()


def _lock_for(folder: Path) -> threading.RLock:
    """The one lock of a repository's links folder, whichever store asks for it."""
    with _LOCKS_GUARD:
        return _LOCKS.setdefault(os.path.abspath(folder), threading.RLock())


class LinkStore:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = _lock_for(folder)

    def _path(self, quest_id: str) -> Path:
        return self.folder / f"{validate_quest_id(quest_id)}.json"

    def get(self, quest_id: str) -> QuestLink | None:
        path = self._path(quest_id)
        try:
            return QuestLink.model_validate_json(path.read_bytes())
        except FileNotFoundError:
            return None
        except (ValidationError, ValueError) as exc:
            raise StoreError(path, f"unreadable quest link: {exc}") from None

    def put(self, link: QuestLink) -> QuestLink:
        with self._lock:
            self.folder.mkdir(parents=True, exist_ok=True)
            path = self._path(link.quest_id)
            write_file(path, link.model_dump_json(indent=2).encode("utf-8"))
        return link

    def update(self, quest_id: str, **changes: Any) -> QuestLink:
        """Change one link under the repository's lock, as it is now (never a copy someone
        read before): a dict is added to the link's map of that name."""
        with self._lock:
            link = self.get(quest_id)
            if link is None:
                raise StoreError(self._path(quest_id), "no such quest link")
            for name, value in changes.items():
                if isinstance(value, dict):
                    changes[name] = {**getattr(link, name), **value}
            return self.put(link.model_copy(update=changes))

    def all(self) -> list[QuestLink]:
        if not self.folder.is_dir():
            return []
        links = []
        for path in sorted(self.folder.glob("*.json")):
            try:
                links.append(QuestLink.model_validate_json(path.read_bytes()))
            except (ValidationError, ValueError):
                continue
        return links

    def for_issue(self, repo: str, issue_number: int) -> QuestLink | None:
        for link in self.all():
            if link.repo == repo and link.issue_number == issue_number and link.active:
                return link
        return None
