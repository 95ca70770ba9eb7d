"""The scheduler picks which ready tasks start, deterministically, within the free slots."""

from __future__ import annotations

import itertools
import random

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaffold.core.scheduler import (
    DEFAULT_SLOTS,
    SchedTask,
    critical_path_lengths,
    effective_priority_ranks,
    priority_rank,
    rank_ready,
    ready_tasks,
    schedule,
)
from scaffold.errors import BacklogError, InvalidIdError


def t(
    num: int | str,
    *deps: int | str,
    priority: str | None = None,
    done: bool = False,
    eligible: bool = True,
) -> SchedTask:
    return SchedTask(
        id=f"TASK-{num}",
        dependencies=tuple(f"TASK-{d}" for d in deps),
        priority=priority,
        done=done,
        eligible=eligible,
    )


# --- readiness -------------------------------------------------------------------


def test_empty_input_starts_nothing() -> None:
    assert schedule([]) == []
    assert critical_path_lengths([]) == {}


def test_default_slot_count_is_three() -> None:
    assert DEFAULT_SLOTS == 3
    assert schedule([t(i) for i in range(1, 6)]) == ["TASK-1", "TASK-2", "TASK-3"]


def test_task_waits_for_undone_dependency() -> None:
    assert schedule([t(1), t(2, 1)]) == ["TASK-1"]


def test_task_is_ready_once_every_dependency_is_done() -> None:
    tasks = [t(1, done=True), t(2, done=True), t(3, 1, 2)]
    assert schedule(tasks) == ["TASK-3"]


def test_one_undone_dependency_is_enough_to_wait() -> None:
    assert schedule([t(1, done=True), t(2, eligible=False), t(3, 1, 2)]) == []


def test_unknown_dependency_means_not_ready() -> None:
    assert schedule([t(1, 99)]) == []
    assert ready_tasks([t(1, 99)]) == []


def test_done_ineligible_and_running_tasks_never_start() -> None:
    tasks = [t(1, done=True), t(2, eligible=False), t(3), t(4)]
    assert schedule(tasks, running={"TASK-3"}, slots=3) == ["TASK-4"]


def test_free_slots_are_slots_minus_running_including_unknown_ids() -> None:
    tasks = [t(i) for i in range(1, 6)]
    assert schedule(tasks, running={"TASK-90"}, slots=3) == ["TASK-1", "TASK-2"]
    assert schedule(tasks, running={"TASK-90", "TASK-91", "TASK-92"}, slots=3) == []
    assert schedule(tasks, running={"TASK-90", "TASK-91", "TASK-92", "TASK-93"}, slots=3) == []


@pytest.mark.parametrize("slots", [0, -1])
def test_no_slot_starts_nothing(slots: int) -> None:
    assert schedule([t(1)], slots=slots) == []


def test_running_ids_are_normalised() -> None:
    assert schedule([t(1), t(2)], running=["task-1"], slots=2) == ["TASK-2"]


def test_ids_and_dependencies_are_normalised() -> None:
    tasks = [SchedTask(id="task-1", done=True), SchedTask(id="2", dependencies=("Task-1",))]
    assert tasks[1].id == "TASK-2"
    assert tasks[1].dependencies == ("TASK-1",)
    assert schedule(tasks) == ["TASK-2"]


def test_invalid_id_is_refused() -> None:
    with pytest.raises(InvalidIdError):
        SchedTask(id="../etc")
    with pytest.raises(InvalidIdError):
        SchedTask(id="TASK-1", dependencies=("--force",))
    with pytest.raises(InvalidIdError):
        schedule([t(1)], running=["-rf"])


def test_duplicate_id_is_refused() -> None:
    with pytest.raises(BacklogError, match="duplicate task id TASK-1"):
        schedule([t(1), SchedTask(id="task-1")])


def test_repeated_dependency_is_harmless() -> None:
    tasks = [t(1), t(2, 1, 1)]
    assert critical_path_lengths(tasks) == {"TASK-1": 2.0, "TASK-2": 1.0}


# --- cycles and deep graphs -------------------------------------------------------


def test_tasks_on_a_cycle_are_never_ready() -> None:
    tasks = [t(1, 2), t(2, 1), t(3, 3), t(4)]
    assert schedule(tasks) == ["TASK-4"]


def test_cycle_does_not_hang_critical_paths() -> None:
    # 1 -> (2 <-> 3) -> 4 ; a cycle costs the sum of its members.
    tasks = [t(1), t(2, 1, 3), t(3, 2), t(4, 3), t(5, 5)]
    cp = critical_path_lengths(tasks)
    assert cp == {"TASK-4": 1.0, "TASK-2": 3.0, "TASK-3": 3.0, "TASK-1": 4.0, "TASK-5": 1.0}


def test_done_task_breaks_a_cycle() -> None:
    tasks = [t(1, 2, done=True), t(2, 1)]
    assert schedule(tasks) == ["TASK-2"]


def test_long_chain_needs_no_recursion() -> None:
    n = 20_000
    tasks = [t(1)] + [t(i, i - 1) for i in range(2, n + 1)]
    cp = critical_path_lengths(tasks)
    assert cp["TASK-1"] == float(n)
    assert cp[f"TASK-{n}"] == 1.0
    assert schedule(tasks) == ["TASK-1"]


def test_long_cycle_needs_no_recursion() -> None:
    n = 20_000
    tasks = [t(1, n)] + [t(i, i - 1) for i in range(2, n + 1)]
    assert schedule(tasks) == []
    assert set(critical_path_lengths(tasks).values()) == {float(n)}


# --- ordering ----------------------------------------------------------------------


def test_priority_rank() -> None:
    assert priority_rank("high") == 0
    assert priority_rank("High") == 0
    assert priority_rank(" MEDIUM ") == 1
    assert priority_rank(None) == 1
    assert priority_rank("urgent") == 1
    assert priority_rank("low") == 2


def test_priority_comes_first() -> None:
    tasks = [
        t(1, priority="low"),
        t(2, priority=None),
        t(3, priority="medium"),
        t(4, priority="High"),
        t(5, priority="whatever"),
    ]
    assert rank_ready(tasks) == ["TASK-4", "TASK-2", "TASK-3", "TASK-5", "TASK-1"]


def test_priority_beats_a_longer_chain() -> None:
    tasks = [t(1), t(2, 1), t(3, 2), t(4, priority="high")]
    assert schedule(tasks, slots=1) == ["TASK-4"]


def test_prerequisite_of_a_high_task_inherits_high() -> None:
    tasks = [t(1, priority="low"), t(2, 1, priority="high"), t(3, priority="medium")]
    assert effective_priority_ranks(tasks)["TASK-1"] == 0
    assert schedule(tasks, slots=1) == ["TASK-1"]


def test_priority_is_inherited_transitively_but_not_from_done_tasks() -> None:
    tasks = [t(1), t(2, 1), t(3, 2, priority="high"), t(4, priority="high", done=True), t(5)]
    ranks = effective_priority_ranks(tasks)
    assert ranks["TASK-1"] == ranks["TASK-2"] == 0
    assert ranks["TASK-5"] == 1


def test_longest_chain_first() -> None:
    # TASK-5 heads a chain of three; TASK-1 stands alone.
    tasks = [t(1), t(5), t(6, 5), t(7, 6)]
    assert rank_ready(tasks) == ["TASK-5", "TASK-1"]


def test_critical_path_lengths_of_a_diamond() -> None:
    tasks = [t(1), t(2, 1), t(3, 1), t(4, 2, 3), t(6, 4), t(5, done=True)]
    assert critical_path_lengths(tasks) == {
        "TASK-1": 4,
        "TASK-2": 3,
        "TASK-3": 3,
        "TASK-4": 2,
        "TASK-6": 1,
        "TASK-5": 0,
    }


def test_critical_path_ignores_done_dependants() -> None:
    tasks = [t(1), t(2, 1, done=True)]
    assert critical_path_lengths(tasks)["TASK-1"] == 1.0


def test_more_dependants_break_a_tie_in_chain_length() -> None:
    tasks = [t(1), t(2), t(3, 2), t(4, 2)]
    assert rank_ready(tasks) == ["TASK-2", "TASK-1"]


def test_numeric_id_order_breaks_the_last_tie() -> None:
    tasks = [t(10), t("2.1"), t(2), t(1)]
    assert rank_ready(tasks) == ["TASK-1", "TASK-2", "TASK-2.1", "TASK-10"]
    assert ready_tasks(list(reversed(tasks))) == ["TASK-1", "TASK-2", "TASK-2.1", "TASK-10"]


def test_prefix_breaks_a_tie_in_number() -> None:
    tasks = [SchedTask(id="ZED-1"), SchedTask(id="ABC-1")]
    assert rank_ready(tasks) == ["ABC-1", "ZED-1"]


def test_schedule_is_a_prefix_of_the_ranking() -> None:
    tasks = [t(i, priority=random.Random(i).choice(["high", "low", None])) for i in range(1, 9)]
    assert schedule(tasks, slots=3) == rank_ready(tasks)[:3]


# --- properties --------------------------------------------------------------------

_PRIORITIES = st.sampled_from(["high", "medium", "low", None, "High", "urgent"])


@st.composite
def task_sets(draw: st.DrawFn, acyclic: bool = False) -> list[SchedTask]:
    n = draw(st.integers(min_value=0, max_value=12))
    ids = [f"TASK-{i}" for i in range(1, n + 1)]
    tasks = []
    for i, tid in enumerate(ids):
        pool = ids[:i] if acyclic else [*ids, "TASK-99"]
        deps = draw(st.lists(st.sampled_from(pool), max_size=4)) if pool else []
        tasks.append(
            SchedTask(
                id=tid,
                dependencies=tuple(deps),
                priority=draw(_PRIORITIES),
                done=draw(st.booleans()),
                eligible=draw(st.booleans()),
            )
        )
    return tasks


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[SchedTask], frozenset[str], int]:
    tasks = draw(task_sets())
    ids = [task.id for task in tasks]
    running = draw(st.sets(st.sampled_from([*ids, "TASK-98"]), max_size=4))
    slots = draw(st.integers(min_value=0, max_value=6))
    return tasks, frozenset(running), slots


def _truly_ready(tasks: list[SchedTask], running: frozenset[str]) -> set[str]:
    by_id = {task.id: task for task in tasks}
    return {
        task.id
        for task in tasks
        if not task.done
        and task.eligible
        and task.id not in running
        and all(d in by_id and by_id[d].done for d in task.dependencies)
    }


@settings(deadline=None)
@given(scenarios())
def test_property_picks_only_ready_tasks_within_free_slots(
    scenario: tuple[list[SchedTask], frozenset[str], int],
) -> None:
    tasks, running, slots = scenario
    picked = schedule(tasks, running, slots)
    ready = _truly_ready(tasks, running)
    by_id = {task.id: task for task in tasks}
    assert len(picked) == len(set(picked))
    assert set(picked) <= ready
    for tid in picked:
        assert tid not in running
        assert not by_id[tid].done
        assert all(by_id[d].done for d in by_id[tid].dependencies)
    free = max(slots - len(running), 0)
    assert len(picked) <= free
    # Work-conserving: a free slot stays empty only when nothing is ready.
    assert len(picked) == min(free, len(ready))


@settings(deadline=None)
@given(scenarios(), st.randoms(use_true_random=False))
def test_property_deterministic_under_permutation(
    scenario: tuple[list[SchedTask], frozenset[str], int], rnd: random.Random
) -> None:
    tasks, running, slots = scenario
    shuffled = []
    for task in tasks:
        deps = list(task.dependencies)
        rnd.shuffle(deps)
        shuffled.append(SchedTask(task.id, tuple(deps), task.priority, task.done, task.eligible))
    rnd.shuffle(shuffled)
    running_list = list(running)
    rnd.shuffle(running_list)
    assert schedule(shuffled, running_list, slots) == schedule(tasks, running, slots)
    assert rank_ready(shuffled, running_list) == rank_ready(tasks, running)
    assert critical_path_lengths(shuffled) == critical_path_lengths(tasks)


@settings(deadline=None)
@given(scenarios())
def test_property_ranking_follows_priority_then_critical_path(
    scenario: tuple[list[SchedTask], frozenset[str], int],
) -> None:
    tasks, running, _ = scenario
    order = rank_ready(tasks, running)
    ranks = effective_priority_ranks(tasks)
    cp = critical_path_lengths(tasks)
    for a, b in itertools.pairwise(order):
        assert ranks[a] <= ranks[b]
        if ranks[a] == ranks[b]:
            assert cp[a] >= cp[b]


@settings(deadline=None)
@given(task_sets(acyclic=True))
def test_property_critical_path_matches_brute_force_on_dags(tasks: list[SchedTask]) -> None:
    by_id = {task.id: task for task in tasks}

    def longest(tid: str) -> int:
        dependants = [s.id for s in tasks if not s.done and tid in s.dependencies and s.id in by_id]
        return 1 + max((longest(s) for s in dependants), default=0)

    cp = critical_path_lengths(tasks)
    for task in tasks:
        assert cp[task.id] == (0 if task.done else longest(task.id))


@settings(deadline=None)
@given(task_sets())
def test_property_critical_paths_are_bounded_even_with_cycles(tasks: list[SchedTask]) -> None:
    cp = critical_path_lengths(tasks)
    assert set(cp) == {task.id for task in tasks}
    for task in tasks:
        assert (0 if task.done else 1) <= cp[task.id] <= len(tasks)
