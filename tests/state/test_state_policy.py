"""When a quest is published, how slots are shared between quests, and a quest store
rebuilt from the branch (pure parts and the store, no orchestrator)."""

from __future__ import annotations

import json
import math
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from harness import git
from scaffold.core.publication import publish_reason
from scaffold.core.scheduler import fair_shares
from scaffold.core.states import Lifecycle
from scaffold.errors import StoreLocked
from scaffold.quest.model import PullRequest, Quest, Question, QuestPhase, TaskRecord
from scaffold.quest.store import QuestStore, draft
from scaffold.roles import Role
from scaffold.runtime.slot_pool import SlotPool
from scaffold.state.document import HistoryDigest, parse, render
from scaffold.state.rebuild import localized, merged_view

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _quest(seq: int, **tasks: TaskRecord) -> Quest:
    return Quest(id="quest-1", seq=seq, started_at=T0, tasks=dict(tasks))


def test_nothing_new_is_not_published_and_the_first_state_is() -> None:
    q = _quest(3)
    assert publish_reason(None, q, 0.0, 5.0) == "quest-1: executing"
    assert publish_reason(q, q, 100.0, 5.0) is None


def test_progress_waits_for_the_interval() -> None:
    before = _quest(3, **{"TASK-1": TaskRecord(id="TASK-1")})
    after = _quest(4, **{"TASK-1": TaskRecord(id="TASK-1", state=Lifecycle.READY)})
    assert publish_reason(before, after, 1.0, 5.0) is None
    assert publish_reason(before, after, 5.0, 5.0) == "quest-1: progress"


def test_a_question_a_merge_and_an_approval_wait_are_published_at_once() -> None:
    task = TaskRecord(id="TASK-1", state=Lifecycle.PROCESSING)
    before = _quest(3, **{"TASK-1": task})
    q = Question(
        id="q-1-1",
        task_id="TASK-1",
        role=Role.CODEWEAVER,
        session_id=None,
        question="Which?",
        context="",
        asked_at=T0,
    )
    asked = before.model_copy(
        update={
            "seq": 4,
            "questions": {"q-1-1": q},
            "tasks": {"TASK-1": task.model_copy(update={"question_id": "q-1-1"})},
        }
    )
    assert publish_reason(before, asked, 0.0, 5.0) == "quest-1: asks q-1-1"
    pr = PullRequest(branch="scaffold/task-1", base="main", number=7)
    waiting = _quest(
        5, **{"TASK-1": task.model_copy(update={"state": Lifecycle.PR_CREATED, "pr": pr})}
    )
    assert publish_reason(before, waiting, 0.0, 5.0) == "quest-1: TASK-1 waits for approval"
    merged = _quest(6, **{"TASK-1": TaskRecord(id="TASK-1", outcome="merged")})
    assert publish_reason(waiting, merged, 0.0, 5.0) == "quest-1: merged TASK-1"
    done = merged.model_copy(update={"seq": 7, "phase": QuestPhase.DONE})
    assert publish_reason(merged, done, 0.0, 5.0) == "quest-1: done"
    # A burst of merges shares one state commit: within merge_gap_s of the last one,
    # a merge waits (a question, an approval or a new phase never does).
    assert publish_reason(waiting, merged, 0.4, 5.0, merge_gap_s=1.0) is None
    assert publish_reason(waiting, merged, 1.0, 5.0, merge_gap_s=1.0) == "quest-1: merged TASK-1"
    assert publish_reason(merged, done, 0.0, 5.0, merge_gap_s=1.0) == "quest-1: done"
    # A new phase goes at once and names the merges that were waiting.
    done_too = done.model_copy(update={"seq": 8})
    assert publish_reason(waiting, done_too, 0.2, 5.0, 1.0) == "quest-1: done; merged TASK-1"
    assert publish_reason(before, asked, 0.0, 5.0, merge_gap_s=1.0) == "quest-1: asks q-1-1"


def test_fair_shares_split_evenly_and_give_the_small_what_they_want() -> None:
    assert fair_shares(4, {"a": 10, "b": 10}) == {"a": 2, "b": 2}
    assert fair_shares(4, {"a": 1, "b": 10}) == {"a": 1, "b": 3}
    assert fair_shares(3, {"a": 0, "b": 5}) == {"a": 0, "b": 3}
    assert fair_shares(3, {}) == {}


@given(st.integers(0, 16), st.dictionaries(st.sampled_from("abcde"), st.integers(0, 10)))
def test_fair_shares_never_exceed_the_slots_or_a_want(slots: int, wants: dict[str, int]) -> None:
    shares = fair_shares(slots, wants)
    assert sum(shares.values()) == min(slots, sum(wants.values()))
    assert all(0 <= shares[q] <= wants[q] for q in wants)
    # max-min fair: a quest below its want has no less than any other quest's share - 1
    for q, share in shares.items():
        if share < wants[q]:
            assert all(share >= other - 1 for other in shares.values())


def test_the_pool_never_overcommits_and_a_parked_quest_takes_nothing() -> None:
    pool = SlotPool(3)
    pool.report("a", 3, 5)  # a came first and took every slot
    pool.report("b", 0, 2)
    assert pool.allowance("b") == 0  # nothing is free: no preemption
    pool.report("a", 1, 3)  # two of a's tasks finished: shares a 2, b 1 of the 3
    assert pool.allowance("a") == 1
    assert pool.allowance("b") == 1
    pool.report("a", 2, 3)
    pool.report("b", 1, 2)
    assert (pool.allowance("a"), pool.allowance("b")) == (0, 0)  # all three slots held
    pool.report("b", 1, 1)
    pool.report("a", 1, 3)
    assert pool.allowance("a") == 1  # b wants no more: a may use the last slot
    pool.report("b", 0, 0)  # b waits on a person: it holds and wants nothing
    assert pool.allowance("a") == 2
    pool.leave("a")
    assert pool.held == 0


def test_restore_creates_keeps_or_replaces_by_seq_and_never_deletes(tmp_path: Path) -> None:
    store = QuestStore(tmp_path / "quests", durable=False)
    assert store.restore(_quest(5)) == "created"
    assert store.read("quest-1").seq == 5
    with store.open_writer("quest-1") as w:
        w.commit(w.quest.model_copy(update={"request": "local"}), [draft("note", "x")])
    assert store.restore(_quest(5)) == "kept"  # the local journal is ahead
    assert store.read("quest-1").request == "local"
    assert store.restore(_quest(9)) == "replaced"
    assert store.read("quest-1").seq == 9
    assert (tmp_path / "quests" / ".replaced" / "quest-1-1" / "quest.json").is_file()
    assert store.list_ids() == ["quest-1"]
    with store.open_writer("quest-1"), pytest.raises(StoreLocked):
        store.restore(_quest(12))  # a live run holds it


def test_a_rebuilt_quest_gets_this_machines_worktrees_and_no_run_folders(tmp_path: Path) -> None:
    task = TaskRecord(
        id="TASK-1", worktree="/elsewhere/wt/task-1", run_dir="/elsewhere/run", branch="b"
    )
    data = render(_quest(2, **{"TASK-1": task}), HistoryDigest())
    doc = parse(data, "x")
    here = localized(doc.quest, lambda tid: tmp_path / tid.lower())
    assert here.tasks["TASK-1"].worktree == str(tmp_path / "task-1")
    assert here.tasks["TASK-1"].run_dir is None


def test_status_sees_the_newer_copy_of_each_quest(tmp_path: Path) -> None:
    store = QuestStore(tmp_path / "quests", durable=False)
    store.create(_quest(4).model_copy(update={"request": "local"})).close()
    newer = parse(render(_quest(9).model_copy(update={"request": "branch"}), HistoryDigest()), "x")
    other = parse(
        render(Quest(id="quest-2", seq=1, started_at=T0, request="only there"), HistoryDigest()),
        "y",
    )
    view = {q.id: q.request for q in merged_view(store, {"quest-1": newer, "quest-2": other})}
    assert view == {"quest-1": "branch", "quest-2": "only there"}


def test_a_long_quest_published_from_its_journal_stays_bounded(tmp_path: Path) -> None:
    """10,000 transitions through the real store and publisher: the file on the branch is
    under 64 KB, and its history accounts for every one of them."""
    import subprocess

    from scaffold.state.branch import StateBranch
    from scaffold.state.document import MAX_BYTES
    from scaffold.state.publisher import StatePublisher

    repo = tmp_path / "repo"
    repo.mkdir()
    git(tmp_path, "init", "-q", str(repo))
    store = QuestStore(tmp_path / "quests", durable=False, snapshot_every=1024)
    writer = store.create(_quest(0, **{"TASK-1": TaskRecord(id="TASK-1")}))
    for _ in range(5_000):
        writer.commit(writer.quest, [draft("transition", "retry_on_error", task_id="TASK-1")])
    publisher = StatePublisher(StateBranch(repo), store, writer)  # reads the journal so far
    for i in range(5_000):
        writer.commit(writer.quest, [draft("note", f"note {i}", task_id="TASK-1")])
    assert publisher.publish("test") is True
    writer.close()
    data = subprocess.run(
        ["git", "show", "scaffold/state:quests/quest-1.json"],
        cwd=repo,
        check=True,
        capture_output=True,
    ).stdout
    assert len(data) < MAX_BYTES
    doc = parse(data, "quests/quest-1.json")
    assert doc.seq == 10_000
    assert doc.history.older.entries + len(doc.history.recent) == 10_000
    assert doc.history.older.events["retry_on_error"] == 5_000
    assert doc.history.older.events["note"] == 5_000 - len(doc.history.recent)
    assert doc.history.recent[-1].event == "note 4999"


def _as_json_dumps_writes_it(q: Quest) -> bytes:
    """The state file as ``json.dumps`` wrote it before pydantic's encoder did."""
    doc = parse(render(q, HistoryDigest()), "x")
    data = doc.model_dump(mode="json", exclude_defaults=False)
    return (json.dumps(data, ensure_ascii=False, indent=1) + "\n").encode("utf-8")


def test_the_state_file_is_the_bytes_json_dumps_wrote() -> None:
    task = TaskRecord(
        id="TASK-1",
        title='Unicode: é, 漢字, 😀, a line\u2028separator, a "quote", a \\ and a \t tab',
        last_summary="ünïcödé\nsecond line\x00nul\x7f",
        cost_usd=0.125,
    )
    q = _quest(3, **{"TASK-1": task}).model_copy(update={"cost_usd": 12.5, "request": "«go»"})
    assert render(q, HistoryDigest()) == _as_json_dumps_writes_it(q)


def test_a_lone_surrogate_or_a_nan_survives_the_round_trip() -> None:
    """Agent output may carry a lone surrogate (escaped, the file is then ASCII); a NaN
    cost is written as ``json`` writes it, and read back."""
    task = TaskRecord(id="TASK-1", title="t", last_summary="half a pair: \ud83d.")
    q = _quest(2, **{"TASK-1": task}).model_copy(update={"cost_usd": math.nan})
    data = render(q, HistoryDigest())
    assert data.isascii()
    assert b"\\ud83d" in data
    assert b'"cost_usd": NaN' in data
    back = parse(data, "x").quest
    assert back.tasks["TASK-1"].last_summary == "half a pair: \ud83d."
    assert math.isnan(back.cost_usd)
    q2 = q.model_copy(update={"tasks": {"TASK-1": task.model_copy(update={"last_summary": "x"})}})
    assert b'"cost_usd": NaN' in render(q2, HistoryDigest())  # pydantic's encoder, too
