"""Dependency graph: cycles and scaffold's readiness rule."""

from __future__ import annotations

from pathlib import Path

from scaffold.backlog import (
    BacklogConfig,
    BacklogTask,
    compute_readiness,
    describe_cycle,
    find_cycles,
)


def task(
    tid: str, status: str = "To Do", deps: tuple[str, ...] = (), folder: str = "tasks"
) -> BacklogTask:
    return BacklogTask(
        id=tid,
        title=tid.lower(),
        status=status,
        path=Path(f"{tid.lower()} - x.md"),
        raw="",
        dependencies=list(deps),
        folder=folder,
    )


def test_no_cycles_in_a_dag() -> None:
    edges = {"TASK-1": [], "TASK-2": ["TASK-1"], "TASK-3": ["TASK-1", "TASK-2"]}
    assert find_cycles(edges) == []


def test_cycle_members_in_edge_order_one_per_cycle() -> None:
    edges = {
        "TASK-5": ["TASK-3"],
        "TASK-3": ["TASK-4"],
        "TASK-4": ["TASK-5"],
        "TASK-1": ["TASK-1"],
        "TASK-7": ["TASK-8"],
        "TASK-8": ["TASK-7"],
        "TASK-9": ["TASK-7", "TASK-404"],
    }
    assert find_cycles(edges) == [
        ["TASK-1"],
        ["TASK-3", "TASK-4", "TASK-5"],
        ["TASK-7", "TASK-8"],
    ]
    assert describe_cycle(["TASK-3", "TASK-4", "TASK-5"]) == "TASK-3 -> TASK-4 -> TASK-5 -> TASK-3"


def test_complex_component_is_one_cycle_listing_every_member() -> None:
    edges = {"TASK-1": ["TASK-2", "TASK-3"], "TASK-2": ["TASK-1"], "TASK-3": ["TASK-1"]}
    (cycle,) = find_cycles(edges)
    assert cycle[:2] == ["TASK-1", "TASK-2"]
    assert sorted(cycle) == ["TASK-1", "TASK-2", "TASK-3"]


def test_deep_chain_needs_no_recursion() -> None:
    edges = {f"TASK-{i}": [f"TASK-{i - 1}"] if i > 1 else [] for i in range(1, 5001)}
    edges["TASK-1"] = ["TASK-5000"]
    (cycle,) = find_cycles(edges)
    assert len(cycle) == 5000
    assert cycle[:3] == ["TASK-1", "TASK-5000", "TASK-4999"]


def test_readiness_rules() -> None:
    config = BacklogConfig()
    tasks = [
        task("TASK-1", "Done"),
        task("TASK-2", "To Do", ("TASK-1",)),  # ready
        task("TASK-3", "In Progress"),  # not waiting
        task("TASK-4", "to do", ("TASK-3",)),  # waits for TASK-3
        task("TASK-5", "To Do", ("TASK-99",)),  # missing dependency
        task("TASK-6", "To Do", ("TASK-7",)),  # cycle
        task("TASK-7", "Done", ("TASK-6",)),
        task("TASK-8", "To Do", ("TASK-7",)),  # depends on a (done) cycle member
        task("TASK-9", "To Do", ("TASK-10",)),
        task("TASK-10", "Weird", (), folder="completed"),  # completed folder means done
        task("TASK-11", "To Do"),  # ready, no deps
        task("TASK-12", "To Do", ("TASK-13",)),  # depends on an ambiguous id
        task("TASK-13", "Done"),
        task("TASK-14", "To Do", ("TASK-14",)),  # self-loop
    ]
    result = compute_readiness(tasks, config, ambiguous={"TASK-13"})
    ready = [tid for tid, r in result.items() if r.ready]
    assert ready == ["TASK-2", "TASK-9", "TASK-11"]
    assert list(result) == [f"TASK-{i}" for i in range(1, 15)]
    assert result["TASK-1"].reasons == ["already done"]
    assert result["TASK-3"].reasons == ["status is 'In Progress', not 'To Do'"]
    assert result["TASK-4"].reasons == ["waits for TASK-3 (In Progress)"]
    assert result["TASK-5"].reasons == ["depends on TASK-99, which does not exist"]
    assert result["TASK-6"].reasons == [
        "in dependency cycle TASK-6 -> TASK-7 -> TASK-6",
        "depends on TASK-7, which is in dependency cycle TASK-6 -> TASK-7 -> TASK-6",
    ]
    assert result["TASK-8"].reasons == [
        "depends on TASK-7, which is in dependency cycle TASK-6 -> TASK-7 -> TASK-6"
    ]
    assert result["TASK-12"].reasons == [
        "depends on TASK-13, whose id is used by more than one file"
    ]
    assert result["TASK-13"].reasons == ["already done", "id TASK-13 is used by more than one file"]
    assert result["TASK-14"].reasons == ["in dependency cycle TASK-14 -> TASK-14"]


def test_custom_statuses() -> None:
    config = BacklogConfig(statuses=("Backlog", "Doing", "Shipped"), default_status="Backlog")
    result = compute_readiness(
        [
            task("TASK-1", "Shipped"),
            task("TASK-2", "Backlog", ("TASK-1",)),
            task("TASK-3", "To Do"),
        ],
        config,
    )
    assert [tid for tid, r in result.items() if r.ready] == ["TASK-2"]
