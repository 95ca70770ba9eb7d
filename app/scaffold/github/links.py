"""What ties a quest to GitHub (repository, issue, comments, PRs): one small JSON file per
quest, owned by the App, written atomically under the repository's one lock, so two
changes made at once both land.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
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

    def modify(self, quest_id: str, change: Callable[[QuestLink], QuestLink]) -> QuestLink:
        """Read, change and write one link under the repository's lock: ``change`` gets
        the link as it is now, never a copy someone read before."""
        with self._lock:
            current = self.get(quest_id)
            if current is None:
                raise StoreError(self._path(quest_id), "no such quest link")
            return self.put(change(current))

    def update(self, quest_id: str, **changes: Any) -> QuestLink:
        return self.modify(quest_id, lambda link: link.model_copy(update=changes))

    def add_question(self, quest_id: str, question_id: str, comment_id: int) -> QuestLink:
        return self.modify(
            quest_id,
            lambda link: link.model_copy(
                update={"question_comments": {**link.question_comments, question_id: comment_id}}
            ),
        )

    def add_pull_request(self, quest_id: str, task_id: str, number: int) -> QuestLink:
        return self.modify(
            quest_id,
            lambda link: link.model_copy(
                update={"pull_requests": {**link.pull_requests, task_id: number}}
            ),
        )

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
