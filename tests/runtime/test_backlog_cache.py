"""The orchestrator's view of the backlog: parsed again only when a file changed."""

from __future__ import annotations

from pathlib import Path

from scaffold import backlog as bl
from scaffold.runtime.backlog_cache import BacklogCache


def _repo(tmp_path: Path) -> Path:
    (tmp_path / "backlog" / "tasks").mkdir(parents=True)
    (tmp_path / "backlog" / "config.yml").write_text(
        'statuses: ["To Do", "In Progress", "Done"]\n', encoding="utf-8"
    )
    bl.create_task(tmp_path, "First", description="One.")
    return tmp_path


def test_every_get_sees_a_new_file(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    cache = BacklogCache(repo)
    first = cache.get()
    assert cache.get() is first  # nothing changed: the same snapshot
    bl.create_task(repo, "Second", description="Two.")
    assert [t.id for t in cache.get().tasks] == ["TASK-1", "TASK-2"]


def test_an_edit_is_seen_at_once(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    cache = BacklogCache(repo)
    path = cache.get().get("TASK-1").path
    bl.set_status(path, "In Progress")
    assert cache.get().get("TASK-1").status == "In Progress"
