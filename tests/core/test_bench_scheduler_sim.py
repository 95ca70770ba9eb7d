"""Keeps bench/bench_scheduler.py from rotting: its simulation must play schedules correctly.

Only correctness is asserted (each task runs once, after its dependencies, within the
slots); how good the makespans are is the benchmark's business, not a test's.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

BENCH = Path(__file__).resolve().parents[2] / "bench" / "bench_scheduler.py"
SLOTS = 3


@pytest.fixture(scope="module")
def bench() -> Iterator[ModuleType]:
    spec = importlib.util.spec_from_file_location("bench_scheduler", BENCH)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # dataclasses look their module up in sys.modules while the class is created.
    sys.modules[spec.name] = module
    try:
        spec.loader.exec_module(module)
        yield module
    finally:
        del sys.modules[spec.name]


def _dags(bench: ModuleType) -> list[Any]:
    rng = random.Random(7)
    return [bench.random_dag(rng, 12, p) for p in (0.0, 0.1, 0.2, 0.4, 1.0)]


def test_simulation_runs_every_task_once_after_its_dependencies(bench: ModuleType) -> None:
    for dag in _dags(bench):
        for policy in bench.CONTENDERS.values():
            result = bench.simulate(dag, policy, SLOTS)
            runs = {run.task_id: run for run in result.runs}
            assert len(runs) == len(result.runs) == len(dag.ids)
            for tid, run in runs.items():
                assert run.finish == pytest.approx(run.start + dag.durations[tid])
                for dep in dag.deps[tid]:
                    assert runs[dep].finish <= run.start
            # Never more than SLOTS at once: count runs open at each start instant.
            for run in result.runs:
                open_runs = [r for r in result.runs if r.start <= run.start < r.finish]
                assert len(open_runs) <= SLOTS
            assert result.makespan == max(run.finish for run in result.runs)
            assert result.makespan >= bench.lower_bound(dag, SLOTS) - 1e-9


def test_simulation_refuses_an_impossible_pick(bench: ModuleType) -> None:
    dag = bench.random_dag(random.Random(1), 4, 1.0)  # a chain: TASK-4 needs TASK-3 ...

    def greedy(tasks: object, running: object, slots: int) -> list[str]:
        return ["TASK-4"]

    with pytest.raises(bench.SimulationError, match="TASK-4 started before"):
        bench.simulate(dag, greedy, SLOTS)


def test_suite_reports_every_contender(bench: ModuleType) -> None:
    suite = bench.run_suite(dags=2, tasks=6, slots=SLOTS, seed=3, edge_prob=0.2)
    results = suite["makespan_over_lower_bound"]
    assert set(results) == set(bench.CONTENDERS)
    for figures in results.values():
        assert figures["mean"] >= 1.0 - 1e-9
        assert figures["max"] >= figures["mean"] - 1e-9
