"""What ties a quest to GitHub (repository, issue, comments, PRs): one small JSON file per
quest, owned by the App, written atomically under the repository's one lock, so two
changes made at once both land.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError

from scaffold.errors import StoreError
from scaffold.fsutil import write_file
from scaffold.git.locks import repo_lock
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


class LinkStore:
    def __init__(self, folder: Path) -> None:
        self.folder = folder
        self._lock = repo_lock(folder, "quest-links")

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

    def put(self, link: QuestLink) -> None:
        with self._lock:
            self._write(link)

    def _write(self, link: QuestLink) -> QuestLink:
        self.folder.mkdir(parents=True, exist_ok=True)
        write_file(self._path(link.quest_id), link.model_dump_json(indent=2).encode("utf-8"))
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
            return self._write(link.model_copy(update=changes))

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
