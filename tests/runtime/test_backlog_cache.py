"""The orchestrator's view of the backlog: re-read when a file changed, and with
``recheck_s`` not even listed again within that time unless scaffold wrote to it."""

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


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_without_recheck_time_every_get_sees_a_change(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    cache = BacklogCache(repo)
    first = cache.get()
    assert cache.get() is first  # nothing changed: the same snapshot
    bl.create_task(repo, "Second", description="Two.")
    assert [t.id for t in cache.get().tasks] == ["TASK-1", "TASK-2"]


def test_a_persons_edit_is_seen_once_the_recheck_time_passed(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    clock = Clock()
    cache = BacklogCache(repo, recheck_s=0.25, clock=clock)
    first = cache.get()
    bl.create_task(repo, "Second", description="Two.")  # a person, not scaffold
    clock.now += 0.1
    assert cache.get() is first
    clock.now += 0.2
    assert [t.id for t in cache.get().tasks] == ["TASK-1", "TASK-2"]


def test_scaffolds_own_write_is_seen_at_once(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    clock = Clock()
    cache = BacklogCache(repo, recheck_s=60.0, clock=clock)
    path = cache.get().get("TASK-1").path
    bl.update_task(path, status="In Progress")
    cache.invalidate()
    assert cache.get().get("TASK-1").status == "In Progress"
