"""Scheduler quality: makespan against its lower bound, scaffold's rule vs FCFS.

Run: ``python bench/bench_scheduler.py [--dags 200] [--tasks 40] [--slots 3] [--seed 4]
[--noise 0.3]``.

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

* Durations are known to scaffold's scheduler: each task's duration is passed as
  its ``estimate``. Real agent runs have only rough estimates (or none: every
  task then weighs 1 and the rule falls back to the longest chain by count).
  FCFS ignores durations.
* Ids are numbered in a topological order (a task depends only on lower ids), as
  PathSeeker writes tasks in the order they can be done; FCFS is then a sensible
  baseline, not a strawman.
* All tasks have the same priority (priority only reorders; it is tested in
  tests/core/test_scheduler.py, not measured here).
* DAG model: task j depends on each earlier task independently with probability
  ``--edge-prob`` (default 0.1, about 2 dependencies per task); durations are
  uniform in [1, 10]. A small sensitivity table for other densities follows.

A second table measures *learned* estimates (``scaffold.core.estimates``, what the
runtime passes when nobody estimated a task). Its DAGs (the same four edge densities,
the "families") get durations from hidden task features (text length, files named,
a label) through a formula the estimator does not share, times log-normal noise
(``--noise``, default 0.3) and a random Spiritmender fix round in 30% of the tasks.
For each family the estimator is fitted on the first half of the DAGs (features and
per-role times, what a quest journal records) and four policies are measured on the
second half: scaffold told the true durations ("oracle"), scaffold with the learned
estimates (computed from features only: the generator never hands a duration of a
measured DAG to the estimator), scaffold with no estimates, and FCFS.

Results go to stdout and, as JSON, to ``bench/results/scheduler.json``.
The simulation is importable (tests/core/test_bench_scheduler_sim.py runs it on a
few DAGs to keep this script from rotting); importing it has no side effects.
"""

from __future__ import annotations

import argparse
import heapq
import json
import math
import random
import statistics
import sys
import time
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from scaffold.core.estimates import DurationModel, TaskFeatures, TaskSample, fit
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


@dataclass(frozen=True)
class Contender:
    """A policy, and whether it is told the true durations as estimates."""

    name: str
    policy: Policy
    knows_durations: bool


CONTENDERS: tuple[Contender, ...] = (
    Contender("scaffold", scaffold_policy, knows_durations=True),
    # The same rule when nobody estimated the tasks: every estimate is 1.
    Contender("scaffold, no estimates", scaffold_policy, knows_durations=False),
    Contender("fcfs", fcfs_policy, knows_durations=False),
)
BASELINE = "fcfs"


def simulate(
    dag: Dag,
    policy: Policy,
    slots: int,
    knows_durations: bool = True,
    estimates: Mapping[str, float] | None = None,
) -> SimResult:
    """Event-driven list scheduling on a simulated clock; checks every pick.

    The policy sees each task's true duration as its estimate when ``knows_durations``,
    else ``estimates[task]`` when given (learned ones), else no estimate at all.
    """
    told: Mapping[str, float] = dag.durations if knows_durations else (estimates or {})
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
                estimate=told.get(tid),
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
    spans: dict[str, list[float]] = {c.name: [] for c in CONTENDERS}
    bounds: list[float] = []
    for _ in range(dags):
        dag = random_dag(rng, tasks, edge_prob)
        bounds.append(lower_bound(dag, slots))
        for c in CONTENDERS:
            spans[c.name].append(simulate(dag, c.policy, slots, c.knows_durations).makespan)
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


# ---------------------------------------------------------------- learned estimates
#
# Production has no estimates; scaffold learns them from finished tasks
# (scaffold.core.estimates). To measure that, the DAGs below get durations that depend
# on what the estimator can see of a task before it runs (length of its text, files it
# names, its label), through a *different* hidden formula than the estimator's model,
# times log-normal noise; and the time is split over roles the way a quest journal
# records it. The estimator is fitted on the first half of a family's DAGs (their
# features and per-role times: the "history") and the policies are measured on the
# second half, where the estimator sees features only, never a duration.

# Hidden multipliers: the estimator must find them from labelled history.
LABEL_EFFECT: Mapping[str, float] = {"bugfix": 0.8, "docs": 0.5, "feature": 1.25, "refactor": 1.7}
ROLE_SHARE: tuple[tuple[str, float], ...] = (
    ("codeweaver", 0.55),
    ("siegemaster", 0.17),
    ("lawbringer", 0.13),
    ("scaffold", 0.15),
)
NOISE_SIGMA = 0.3  # log-normal noise on each true duration (about +-30%)
SPIRITMENDER_SHARE = 0.3  # tasks that need a fix round: unpredictable extra time


@dataclass(frozen=True)
class FeaturedDag:
    """A DAG whose true durations come from hidden features plus noise."""

    dag: Dag
    features: Mapping[str, TaskFeatures]
    seconds_by_role: Mapping[str, Mapping[str, float]]


def featured_dag(rng: random.Random, n: int, edge_prob: float, noise: float) -> FeaturedDag:
    shape = random_dag(rng, n, edge_prob)
    features: dict[str, TaskFeatures] = {}
    by_role: dict[str, dict[str, float]] = {}
    durations: dict[str, float] = {}
    for tid in shape.ids:
        chars = int(min(6000.0, max(40.0, rng.lognormvariate(math.log(500), 0.9))))
        files = rng.choice((0, 1, 1, 2, 2, 3, 4, 6, 9))
        label = rng.choice(sorted(LABEL_EFFECT))
        work = 1 + 0.3 * files + chars / 1000 + 0.5 * math.sqrt(files * chars / 1000)
        base = 1.6 * math.pow(work, 0.8) * LABEL_EFFECT[label] * rng.lognormvariate(0.0, noise)
        weights = [share * rng.uniform(0.7, 1.3) for _, share in ROLE_SHARE]
        roles = {
            role: base * w / sum(weights) for (role, _), w in zip(ROLE_SHARE, weights, strict=True)
        }
        if rng.random() < SPIRITMENDER_SHARE:
            roles["spiritmender"] = base * rng.uniform(0.2, 0.6)
        features[tid] = TaskFeatures(text_chars=chars, files=files, labels=(label,))
        by_role[tid] = roles
        durations[tid] = math.fsum(roles.values())
    dag = Dag(ids=shape.ids, deps=shape.deps, durations=durations)
    return FeaturedDag(dag=dag, features=features, seconds_by_role=by_role)


def learned_estimates(model: DurationModel | None, fd: FeaturedDag) -> dict[str, float]:
    """What the estimator predicts for each task of ``fd`` from its features alone."""
    if model is None:
        return {}
    return {tid: model.estimate(fd.features[tid]) for tid in fd.dag.ids}


HISTORY_SIZES = (5, 20)  # past tasks, for the "young repository" line
LEARNED_CONTENDERS = ("scaffold, oracle", "scaffold, learned", "scaffold, no estimates", "fcfs")


def _family(
    dags: int, tasks: int, seed: int, edge_prob: float, noise: float
) -> tuple[list[FeaturedDag], list[FeaturedDag]]:
    rng = random.Random(seed * 1_000_003 + round(edge_prob * 1000))
    runs = [featured_dag(rng, tasks, edge_prob, noise) for _ in range(max(dags, 2))]
    return runs[: len(runs) // 2], runs[len(runs) // 2 :]


def _history(train: Sequence[FeaturedDag], limit: int | None = None) -> list[TaskSample]:
    samples = [
        TaskSample(fd.features[tid], fd.seconds_by_role[tid]) for fd in train for tid in fd.dag.ids
    ]
    return samples[:limit]


def run_learned_suite(
    dags: int, tasks: int, slots: int, seed: int, edge_prob: float, noise: float = NOISE_SIGMA
) -> dict[str, object]:
    """Fit on the first half of ``dags`` feature-driven DAGs, measure on the second."""
    train, test = _family(dags, tasks, seed, edge_prob, noise)
    model = fit(_history(train))
    spans: dict[str, list[float]] = {name: [] for name in LEARNED_CONTENDERS}
    bounds: list[float] = []
    log_errors: list[float] = []
    for fd in test:
        dag = fd.dag
        learned = learned_estimates(model, fd)
        log_errors += [abs(math.log(learned[t] / dag.durations[t])) for t in learned]
        bounds.append(lower_bound(dag, slots))
        spans["scaffold, oracle"].append(simulate(dag, scaffold_policy, slots).makespan)
        spans["scaffold, learned"].append(
            simulate(dag, scaffold_policy, slots, False, learned).makespan
        )
        spans["scaffold, no estimates"].append(
            simulate(dag, scaffold_policy, slots, False).makespan
        )
        spans["fcfs"].append(simulate(dag, fcfs_policy, slots, False).makespan)
    return {
        "dags_train": len(train),
        "dags_test": len(test),
        "tasks": tasks,
        "slots": slots,
        "seed": seed,
        "edge_prob": edge_prob,
        "noise_sigma": noise,
        "estimate_median_abs_log_error": statistics.median(log_errors) if log_errors else None,
        "makespan_over_lower_bound": _summarise(spans, bounds),
    }


def learned_with_little_history(
    dags: int, tasks: int, slots: int, seed: int, edge_prob: float, noise: float, history: int
) -> float:
    """Mean makespan / bound of the learned policy fitted on only ``history`` past tasks
    (the first ones of the training half): what a young repository gets."""
    train, test = _family(dags, tasks, seed, edge_prob, noise)
    model = fit(_history(train, history))
    ratios = [
        simulate(fd.dag, scaffold_policy, slots, False, learned_estimates(model, fd)).makespan
        / lower_bound(fd.dag, slots)
        for fd in test
    ]
    return statistics.fmean(ratios)


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
    parser.add_argument("--noise", type=float, default=NOISE_SIGMA, help="log-normal sigma")
    parser.add_argument("--no-write", action="store_true", help="do not write the JSON file")
    args = parser.parse_args(argv)

    began = time.perf_counter()
    main_suite = run_suite(args.dags, args.tasks, args.slots, args.seed, args.edge_prob)
    sensitivity = [
        run_suite(args.dags, args.tasks, args.slots, args.seed, p)
        for p in (0.05, 0.2, 0.3)
        if p != args.edge_prob
    ]
    families = [args.edge_prob, *(p for p in (0.05, 0.2, 0.3) if p != args.edge_prob)]
    learned = [
        run_learned_suite(args.dags, args.tasks, args.slots, args.seed, p, args.noise)
        for p in families
    ]
    little = {
        str(n): statistics.fmean(
            learned_with_little_history(
                args.dags, args.tasks, args.slots, args.seed, p, args.noise, n
            )
            for p in families
        )
        for n in HISTORY_SIZES
    }
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
    print()
    print(
        "Learned estimates: durations from hidden task features (text length, files, label)"
        f" x log-normal noise (sigma {args.noise}); estimator fitted on the first half of"
        " each family's DAGs, measured on the second half."
    )
    print(header + f" {'est err':>8}")
    print("-" * (len(header) + 9))
    for suite in learned:
        err = suite["estimate_median_abs_log_error"]
        label = f"p={suite['edge_prob']}" + (
            " (main)" if suite["edge_prob"] == args.edge_prob else ""
        )
        for line in _rows(label, suite):
            tail = f" {err:>8.3f}" if "learned" in line and isinstance(err, float) else ""
            print(line + tail)
    means = {
        name: statistics.fmean(_result(s)[name]["mean"] for s in learned)
        for name in LEARNED_CONTENDERS
    }
    for name, value in means.items():
        print(f"{'mean (4 fam.)':<14} {name:<24} {value:>7.3f}")
    print("(est err: median |log(estimate / true duration)| on the measured half)")
    print(
        "learned from only N past tasks, mean of families: "
        + ", ".join(f"N={n}: {v:.3f}" for n, v in little.items())
    )
    print(f"({seconds:.1f} s)")

    if not args.no_write:
        RESULTS.parent.mkdir(parents=True, exist_ok=True)
        payload = {
            "main": main_suite,
            "sensitivity": sensitivity,
            "learned": learned,
            "learned_mean_of_families": means,
            "learned_with_little_history": little,
            "python": sys.version.split()[0],
        }
        RESULTS.write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
        print(f"wrote {RESULTS}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
