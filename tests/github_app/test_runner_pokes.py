"""Which pokes of a quest start no run: a quest a person stopped, and a finished quest
(the echoes of its own last merges), unless a message waits for it."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from scaffold.github.runner import QuestRunner
from scaffold.quest.model import Quest, QuestPhase
from scaffold.runtime import inbox
from scaffold.runtime.session import quest_store


def _context(repo: Path, **quest: Any) -> Any:
    store = quest_store(repo)
    store.create(Quest(id="issue-1", request="r", **quest)).close()
    return SimpleNamespace(full_name="acme/widgets", checkout=SimpleNamespace(path=repo))


@pytest.mark.parametrize("phase", [QuestPhase.DONE, QuestPhase.FAILED])
def test_a_finished_quest_runs_only_for_a_message(tmp_path: Path, phase: QuestPhase) -> None:
    ctx = _context(tmp_path, phase=phase)
    runner = QuestRunner()
    assert runner._nothing_to_run(ctx, "issue-1") == "quest finished; not run"
    inbox.post(tmp_path / ".scaffold", inbox.make("retry", "issue-1", task_id="TASK-1", by="a"))
    assert runner._nothing_to_run(ctx, "issue-1") is None


def test_a_quest_at_work_always_runs(tmp_path: Path) -> None:
    ctx = _context(tmp_path, phase=QuestPhase.EXECUTING)
    assert QuestRunner()._nothing_to_run(ctx, "issue-1") is None


def test_a_stopped_quest_runs_for_a_retry_or_the_label_put_back(tmp_path: Path) -> None:
    ctx = _context(tmp_path, phase=QuestPhase.EXECUTING, stop_limit="abort")
    runner = QuestRunner()
    assert runner._nothing_to_run(ctx, "issue-1") == "quest stopped by a person; not run"
    runner._resume.add(("acme/widgets", "issue-1"))
    assert runner._nothing_to_run(ctx, "issue-1") is None
    inbox.post(tmp_path / ".scaffold", inbox.make("answer", "issue-1", question_id="q", by="a"))
    assert runner._nothing_to_run(ctx, "issue-1") == "quest stopped by a person; not run"
    inbox.post(tmp_path / ".scaffold", inbox.make("retry", "issue-1", task_id="TASK-1", by="a"))
    assert runner._nothing_to_run(ctx, "issue-1") is None
