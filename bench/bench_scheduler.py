"""Scheduler quality: makespan against its lower bound, scaffold's rule vs FCFS.

Run: ``python bench/bench_scheduler.py [--dags 200] [--tasks 40] [--slots 3] [--seed 4]``.

What it measures. For each of ``--dags`` random task DAGs (seeded RNG, so every run
sees the same graphs) an event-driven list-scheduling simulation plays the quest
out on a simulated clock: at time 0 and whenever a slot frees, the policy is asked
which ready tasks to start (exactly what the runtime does with
:func:`scaffold.core.scheduler.schedule`). Each task then runs for its duration.
The figure of merit is ``makespan / lower bound`` with

    lower bound = max(critical path length, total work / slots)

which no schedule can beat (1.0 = provably optimal). Two policies run on the same
DAGs: scaffold's scheduler, and FCFS (the ready tasks in numeric id order, what a
plain "take the lowest-numbered ready task" loop does).

Assumptions, stated because they flatter or hurt a policy:

* Durations are unknown to both policies, as in production: scaffold ranks by the
  longest chain counted in tasks, FCFS by id.
* Ids are numbered in a topological order (a task depends only on lower ids), as
  PathSeeker writes tasks in the order they can be done; FCFS is then a sensible
  baseline, not a strawman.
* All tasks have the same priority (priority only reorders; it is tested in
  tests/core/test_scheduler.py, not measured here).
* DAG model: task j depends on each earlier task independently with probability
  ``--edge-prob`` (default 0.1, about 2 dependencies per task); durations are
  uniform in [1, 10]. A small sensitivity table for other densities follows.

Results go to stdout and, as JSON, to ``bench/results/scheduler.json``.
The simulation is importable (tests/core/test_bench_scheduler_sim.py runs it on a
few DAGs to keep this script from rotting); importing it has no side effects.
"""

from __future__ import annotations

import argparse
import heapq
import json
import random
import statistics
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from scaffold.core.scheduler import SchedTask, ready_tasks, schedule

Policy = Callable[[Sequence[SchedTask], Collection[str], int], list[str]]

RESULTS = Path(__file__).resolve().parent / "results" / "scheduler.json"


@dataclass(frozen=True)
class Dag:
    """A task graph with a duration per task; ``ids`` is in topological order."""

    ids: tuple[str, ...]
    deps: Mapping[str, tuple[str, ...]]
    durations: Mapping[str, float]


@dataclass(frozen=True)
class Run:
    task_id: str
    start: float
    finish: float


@dataclass(frozen=True)
class SimResult:
    makespan: float
    runs: tuple[Run, ...]


class SimulationError(Exception):
    """The policy asked for something impossible, or the simulation deadlocked."""


def random_dag(
    rng: random.Random,
    n: int,
    edge_prob: float,
    min_duration: float = 1.0,
    max_duration: float = 10.0,
) -> Dag:
    ids = tuple(f"TASK-{i + 1}" for i in range(n))
    deps = {ids[j]: tuple(ids[i] for i in range(j) if rng.random() < edge_prob) for j in range(n)}
    durations = {tid: rng.uniform(min_duration, max_duration) for tid in ids}
    return Dag(ids=ids, deps=deps, durations=durations)


def scaffold_policy(tasks: Sequence[SchedTask], running: Collection[str], slots: int) -> list[str]:
    return schedule(tasks, running, slots)


def fcfs_policy(tasks: Sequence[SchedTask], running: Collection[str], slots: int) -> list[str]:
    free = slots - len(running)
    return ready_tasks(tasks, running)[: max(free, 0)]


CONTENDERS: Mapping[str, Policy] = {"scaffold": scaffold_policy, "fcfs": fcfs_policy}
BASELINE = "fcfs"


def simulate(dag: Dag, policy: Policy, slots: int) -> SimResult:
    """Event-driven list scheduling on a simulated clock; checks every pick."""
    now = 0.0
    started: set[str] = set()
    done: set[str] = set()
    running: dict[str, float] = {}
    events: list[tuple[float, str]] = []
    runs: list[Run] = []
    while True:
        tasks = [
            SchedTask(
                id=tid,
                dependencies=dag.deps[tid],
                done=tid in done,
                eligible=tid not in started,
            )
            for tid in dag.ids
        ]
        for tid in policy(tasks, frozenset(running), slots):
            if tid in started:
                raise SimulationError(f"{tid} started twice")
            if len(running) >= slots:
                raise SimulationError(f"{tid} started with every slot busy")
            missing = [d for d in dag.deps[tid] if d not in done]
            if missing:
                raise SimulationError(f"{tid} started before {missing}")
            finish = now + dag.durations[tid]
            started.add(tid)
            running[tid] = finish
            heapq.heappush(events, (finish, tid))
            runs.append(Run(tid, now, finish))
        if not events:
            break
        # Free every slot that frees at this instant before asking again.
        now = events[0][0]
        while events and events[0][0] == now:
            _, tid = heapq.heappop(events)
            del running[tid]
            done.add(tid)
    if len(done) != len(dag.ids):
        raise SimulationError(f"deadlock: {len(dag.ids) - len(done)} tasks never ran")
    return SimResult(makespan=now, runs=tuple(runs))


def critical_path(dag: Dag) -> float:
    """Longest duration-weighted chain (independent of the code under test)."""
    finish: dict[str, float] = {}
    for tid in dag.ids:  # topological order by construction
        finish[tid] = dag.durations[tid] + max((finish[d] for d in dag.deps[tid]), default=0.0)
    return max(finish.values(), default=0.0)


def lower_bound(dag: Dag, slots: int) -> float:
    return max(critical_path(dag), sum(dag.durations.values()) / slots)


def run_suite(dags: int, tasks: int, slots: int, seed: int, edge_prob: float) -> dict[str, object]:
    """Every contender on the same ``dags`` DAGs; ratios to the bound and to the baseline."""
    rng = random.Random(seed)
    spans: dict[str, list[float]] = {name: [] for name in CONTENDERS}
    bounds: list[float] = []
    for _ in range(dags):
        dag = random_dag(rng, tasks, edge_prob)
        bounds.append(lower_bound(dag, slots))
        for name, policy in CONTENDERS.items():
            spans[name].append(simulate(dag, policy, slots).makespan)
    return {
        "dags": dags,
        "tasks": tasks,
        "slots": slots,
        "seed": seed,
        "edge_prob": edge_prob,
        "makespan_over_lower_bound": _summarise(spans, bounds),
    }


def _summarise(
    spans: Mapping[str, Sequence[float]], bounds: Sequence[float]
) -> dict[str, dict[str, float]]:
    results: dict[str, dict[str, float]] = {}
    for name, values in spans.items():
        to_bound = [v / b for v, b in zip(values, bounds, strict=True)]
        to_base = [v / b for v, b in zip(values, spans[BASELINE], strict=True)]
        results[name] = {
            "mean": statistics.fmean(to_bound),
            "max": max(to_bound),
            "at_bound_share": sum(r <= 1 + 1e-9 for r in to_bound) / len(to_bound),
            "vs_fcfs_mean": statistics.fmean(to_base),
            "vs_fcfs_max": max(to_base),
        }
    return results


def _result(suite: Mapping[str, object]) -> dict[str, dict[str, float]]:
    results = suite["makespan_over_lower_bound"]
    assert isinstance(results, dict)
    return results


def _rows(label: str, suite: Mapping[str, object]) -> list[str]:
    results = _result(suite)
    rows = []
    for name, r in results.items():
        rows.append(
            f"{label:<14} {name:<24} {r['mean']:>7.3f} {r['max']:>7.3f} "
            f"{r['at_bound_share']:>8.0%} {r['vs_fcfs_mean']:>8.3f} {r['vs_fcfs_max']:>8.3f}"
        )
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--dags", type=int, default=200)
    parser.add_argument("--tasks", type=int, default=40)
    parser.add_argument("--slots", type=int, default=3)
    parser.add_argument("--seed", type=int, default=4)
    parser.add_argument("--edge-prob", type=float, default=0.1)
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON file")
    args = parser.parse_args(argv)

    began = time.perf_counter()
    main_suite = run_suite(args.dags, args.tasks, args.slots, args.seed, args.edge_prob)
    sensitivity = [
        run_suite(args.dags, args.tasks, args.slots, args.seed, p)
        for p in (0.05, 0.2, 0.3)
        if p != args.edge_prob
    ]
    seconds = time.perf_counter() - began

    print(
        f"{args.dags} random DAGs x {args.tasks} tasks, {args.slots} slots, seed {args.seed}."
        " makespan / lower bound (1.000 = optimal); vs fcfs = makespan / FCFS makespan"
    )
    header = (
        f"{'DAGs':<14} {'policy':<24} {'mean':>7} {'max':>7} {'at bound':>8}"
        f" {'vs fcfs':>8} {'(max)':>8}"
    )
    print(header)
    print("-" * len(header))
    for line in _rows(f"p={args.edge_prob} (main)", main_suite):
        print(line)
    for suite in sensitivity:
        for line in _rows(f"p={suite['edge_prob']}", suite):
            print(line)
    print(f"({seconds:.1f} s)")

    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "main": main_suite,
            "sensitivity": sensitivity,
            "python": sys.version.split()[0],
        }
        RESULTS.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
