"""Learned estimates read from quest journals the real orchestrator wrote, and used by it."""

from __future__ import annotations

import shutil
import threading
from datetime import UTC, datetime, timedelta
from typing import Any

from repo_builder import MakeProject, Project, TaskSpec, codeweaver_done

from scaffold import backlog as bl
from scaffold.core.estimates import SCAFFOLD_ROLE
from scaffold.quest.model import HistoryEntry
from scaffold.quest.store import QuestStore
from scaffold.runtime.estimates import LearnedEstimates, slot_seconds, task_features
from scaffold.runtime.session import state_branch

LONG = (
    "Rewrite the exporter in app/export.py and app/formats/csv.py, keep docs/export.md "
    "in step, and cover every format in tests/test_export.py. " * 6
)


FIRST = TaskSpec("Add the notes", description="Write notes/task-1.txt with a line.")
RUNS = [codeweaver_done(f"TASK-{n}") for n in (1, 2, 3)]


def _add_tasks(project: Project, *specs: tuple[str, str]) -> None:
    for title, description in specs:
        bl.create_task(project.repo, title, description=description)
    project.git("add", "-A")
    project.git("commit", "-q", "-m", "more tasks")


def test_no_history_no_estimates(make_project: MakeProject) -> None:
    project = make_project(["Add the notes"], [])
    snapshot = bl.load_backlog(project.repo)
    assert LearnedEstimates(project.repo).minutes(snapshot, 0) == {}


def _second_round(project: Project) -> list[str]:
    _add_tasks(project, ("Fix a typo", "Fix it."), ("Rewrite the exporter", LONG))
    result = project.run()
    assert result.exit_code == 0, result.output
    steps = [i["step"] for i in project.invocations(role="codeweaver")]
    return [s for s in steps if s != "TASK-1"]


def test_the_orchestrator_starts_the_longer_task_first(make_project: MakeProject) -> None:
    # One slot; TASK-1's run is the history. TASK-2 (short) and TASK-3 (long) are then
    # ready together: with no estimates the lower id wins the tie, with learned ones
    # the longer task goes first.
    project = make_project([FIRST], RUNS, {"slots": 1})
    assert project.run().exit_code == 0

    # The history the first run left: one sample, timed per role from its journal.
    learned = LearnedEstimates(project.repo)
    snapshot = bl.load_backlog(project.repo)
    samples = learned.samples(snapshot.tasks)
    assert len(samples) == 1
    roles = samples[0].seconds_by_role
    assert {"codeweaver", "siegemaster", "lawbringer", SCAFFOLD_ROLE} <= set(roles)
    assert all(seconds > 0 for seconds in roles.values())
    assert samples[0].features == task_features(project.backlog_task("TASK-1"))
    minutes = learned.minutes(snapshot, 0)
    assert set(minutes) == {"TASK-1"}
    assert minutes["TASK-1"] > 0
    assert learned.model is not None
    assert learned.model.samples == 1
    # Cached: the same generation and snapshot give the very same mapping back.
    assert learned.minutes(snapshot, 0) is minutes
    # Another clone has no journal, only the state branch: the same history.
    elsewhere = QuestStore(project.root / "no-journals")
    from_branch = LearnedEstimates(project.repo, elsewhere, state_branch(project.repo))
    assert from_branch.samples(snapshot.tasks) == samples
    assert LearnedEstimates(project.repo, elsewhere).samples(snapshot.tasks) == []

    assert _second_round(project) == ["TASK-3", "TASK-2"]


def test_without_learning_the_tie_goes_to_the_lower_id(make_project: MakeProject) -> None:
    config = {"slots": 1, "scheduler": {"learn_estimates": False}}
    project = make_project([FIRST], RUNS, config)
    assert project.run().exit_code == 0
    assert _second_round(project) == ["TASK-2", "TASK-3"]


# --- reading durations out of a journal ------------------------------------------------

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def tr(
    seq: int, minute: float, task: str, event: str, src: str, dst: str, role: str = ""
) -> HistoryEntry:
    return HistoryEntry(
        seq=seq,
        at=T0 + timedelta(minutes=minute),
        kind="transition",
        task_id=task,
        event=event,
        source=src,
        target=dst,
        detail={"role": role} if role else {},
    )


def test_slot_seconds_charges_roles_and_skips_parked_and_unmerged_time() -> None:
    entries = [
        tr(1, 0, "TASK-1", "deps_resolved", "Idle", "Ready"),
        tr(2, 5, "TASK-1", "task_selected", "Ready", "Allocating"),
        tr(3, 6, "TASK-1", "worktree_created", "Allocating", "Processing"),
        tr(4, 16, "TASK-1", "question_asked", "Processing", "Processing", "codeweaver"),
        # Parked on a person for an hour: no slot held.
        tr(5, 76, "TASK-1", "answer_received", "Processing", "Processing"),
        tr(6, 86, "TASK-1", "code_complete", "Processing", "TestValidation", "codeweaver"),
        tr(7, 88, "TASK-1", "ward_passed", "TestValidation", "TestValidation"),
        tr(
            8,
            93,
            "TASK-1",
            "edge_cases_complete",
            "TestValidation",
            "TestValidation",
            "siegemaster",
        ),
        tr(9, 94, "TASK-1", "review_complete", "TestValidation", "DiagramCheck", "lawbringer"),
        tr(10, 95, "TASK-1", "diagrams_synced", "DiagramCheck", "PR_Created"),
        # Waiting for approval holds no slot either.
        tr(11, 300, "TASK-1", "pr_approved", "PR_Created", "Merging"),
        tr(12, 301, "TASK-1", "merge_complete", "Merging", "Cleanup"),
        tr(13, 302, "TASK-1", "backlog_synced", "Cleanup", "Idle"),
        # TASK-2 never merged: no sample.
        tr(14, 0, "TASK-2", "task_selected", "Ready", "Allocating"),
        tr(15, 1, "TASK-2", "worktree_created", "Allocating", "Processing"),
        HistoryEntry(seq=16, at=T0, kind="note", event="agent_result"),
    ]
    spent = slot_seconds(entries)
    assert set(spent) == {"TASK-1"}
    assert spent["TASK-1"] == {
        # Allocating and Ward; DiagramCheck, the merge and the cleanup hold no slot.
        SCAFFOLD_ROLE: 60.0 * (1 + 2),
        "codeweaver": 60.0 * (10 + 10),
        "siegemaster": 60.0 * 5,
        "lawbringer": 60.0 * 1,
    }


def test_slot_seconds_counts_from_the_last_start() -> None:
    entries = [
        tr(1, 0, "TASK-1", "task_selected", "Ready", "Allocating"),
        tr(2, 1, "TASK-1", "worktree_created", "Allocating", "Processing"),
        tr(3, 50, "TASK-1", "abort_signal", "Processing", "Idle"),
        tr(4, 60, "TASK-1", "deps_resolved", "Idle", "Ready"),
        tr(5, 61, "TASK-1", "task_selected", "Ready", "Allocating"),
        tr(6, 62, "TASK-1", "worktree_created", "Allocating", "Processing"),
        tr(7, 72, "TASK-1", "code_complete", "Processing", "TestValidation", "codeweaver"),
        tr(8, 73, "TASK-1", "tests_passed", "TestValidation", "DiagramCheck"),
        tr(9, 74, "TASK-1", "diagrams_synced", "DiagramCheck", "PR_Created"),
        tr(10, 80, "TASK-1", "pr_approved", "PR_Created", "Merging"),
        tr(11, 81, "TASK-1", "merge_complete", "Merging", "Cleanup"),
    ]
    # The journal ends mid-cleanup: the merged task still counts.
    assert slot_seconds(entries) == {"TASK-1": {SCAFFOLD_ROLE: 60.0 * 2, "codeweaver": 600.0}}


def test_slot_seconds_leaves_out_the_wait_of_a_task_made_ready_ahead() -> None:
    """Worktree made while every slot was busy: its first agent started 30 minutes
    later, when a slot freed; that wait is no time of the task's."""

    def note(seq: int, minute: float, text: str) -> HistoryEntry:
        at = T0 + timedelta(minutes=minute)
        return HistoryEntry(seq=seq, at=at, kind="note", task_id="TASK-1", event=text)

    entries = [
        tr(1, 0, "TASK-1", "task_selected", "Ready", "Allocating"),
        tr(2, 1, "TASK-1", "worktree_created", "Allocating", "Processing"),
        note(3, 31, "agent started: codeweaver (implement)"),
        tr(4, 41, "TASK-1", "code_complete", "Processing", "TestValidation", "codeweaver"),
        note(5, 45, "agent started: siegemaster (validate)"),  # a later start: no change
        tr(6, 51, "TASK-1", "review_complete", "TestValidation", "DiagramCheck", "siegemaster"),
        tr(7, 52, "TASK-1", "merge_complete", "DiagramCheck", "Cleanup"),
    ]
    assert slot_seconds(entries) == {
        "TASK-1": {SCAFFOLD_ROLE: 60.0, "codeweaver": 600.0, "siegemaster": 600.0}
    }


def test_slot_seconds_needs_the_start_of_a_task() -> None:
    # A history cut short (the state branch keeps only the newest entries).
    entries = [
        tr(1, 10, "TASK-1", "code_complete", "Processing", "TestValidation", "codeweaver"),
        tr(2, 11, "TASK-1", "tests_passed", "TestValidation", "DiagramCheck"),
        tr(3, 12, "TASK-1", "diagrams_synced", "DiagramCheck", "PR_Created"),
        tr(4, 13, "TASK-1", "pr_approved", "PR_Created", "Merging"),
        tr(5, 14, "TASK-1", "merge_complete", "Merging", "Cleanup"),
        tr(6, 15, "TASK-1", "backlog_synced", "Cleanup", "Idle"),
    ]
    assert slot_seconds(entries) == {}


def test_a_refit_after_a_merge_runs_in_the_background(make_project: MakeProject) -> None:
    """The orchestrator's estimates: the first fit answers at once; a later one (a task
    merged) runs in a thread, and the model before it answers meanwhile."""
    project = make_project([FIRST], RUNS, {"slots": 1})
    assert project.run().exit_code == 0
    snapshot = bl.load_backlog(project.repo)
    journals = project.root / "journals-later"
    learned = LearnedEstimates(project.repo, QuestStore(journals), background=True)
    assert learned.minutes(snapshot, 0) == {}  # first fit, in the caller: no history yet

    shutil.copytree(project.repo / ".scaffold" / "quests", journals)
    release = threading.Event()
    real_samples = learned.samples

    def held_samples(tasks: Any) -> Any:
        release.wait()
        return real_samples(tasks)

    learned.samples = held_samples  # type: ignore[method-assign]
    assert learned.minutes(snapshot, 1) == {}  # the refit waits; the old model answers
    refit = learned._refitting
    assert refit is not None
    release.set()
    refit.join()
    minutes = learned.minutes(snapshot, 1)
    assert set(minutes) == {"TASK-1"}
    assert learned.model is not None
    assert learned.model.samples == 1


def test_refits_are_paced_by_how_much_the_history_grew(make_project: MakeProject) -> None:
    """With 8 samples behind the last fit, one more merge waits; two more refit."""
    project = make_project([FIRST], RUNS, {"slots": 1})
    assert project.run().exit_code == 0
    snapshot = bl.load_backlog(project.repo)
    learned = LearnedEstimates(project.repo)
    fits: list[int] = []
    real_samples = learned.samples

    def counted(tasks: Any) -> Any:
        fits.append(1)
        return real_samples(tasks) * 8  # as if eight tasks had merged

    learned.samples = counted  # type: ignore[method-assign]
    learned.minutes(snapshot, 0)
    assert len(fits) == 1
    for path in (project.repo / ".scaffold" / "quests").glob("*/journal.jsonl"):
        with open(path, "a", encoding="utf-8") as fh:
            fh.write("\n")  # the journals changed: only the pacing can hold a refit back
    learned.minutes(snapshot, 1)
    assert len(fits) == 1
    learned.minutes(snapshot, 2)
    assert len(fits) == 2
