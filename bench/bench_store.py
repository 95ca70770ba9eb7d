"""Benchmark: cost of persisting one transition with a short vs a long quest history.

The quest store appends one journal line per commit and rewrites the snapshot only
every ``snapshot_every`` commits, so a commit should cost the same whether the
quest has 10 or 100,000 history entries. This script measures it side by side in
one run: it builds both stores (same quest, 20 tasks; only the history length
differs), then interleaves timed rounds of commits on each (alternating which goes
first) and reports the per-commit median, p90 and mean (the mean includes the
amortized snapshot rewrites) and the ratio long/short. The main figures include
the journal fdatasync (the real cost); ``durable=False`` figures show the CPU part.
It also times a lock-free ``read`` (snapshot + tail replay) of each store.

    .venv/bin/python bench/bench_store.py [--quick] [--rounds N] [--commits N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from scaffold.quest.model import Quest, TaskRecord
from scaffold.quest.store import QuestStore, QuestWriter, draft

N_TASKS = 20
SHORT = 10
LONG = 100_000


def make_quest(qid: str) -> Quest:
    tasks = {
        f"TASK-{i}": TaskRecord(id=f"TASK-{i}", title=f"task {i}") for i in range(1, N_TASKS + 1)
    }
    return Quest(id=qid, request="benchmark quest", tasks=tasks)


def one_transition(w: QuestWriter, i: int) -> None:
    """A commit changing one task, with one history entry: a typical transition."""
    q = w.quest
    tid = f"TASK-{i % N_TASKS + 1}"
    t = q.tasks[tid]
    t = t.model_copy(update={"attempts": t.attempts + 1, "last_summary": f"step {i}"})
    w.commit(
        q.model_copy(update={"tasks": {**q.tasks, tid: t}}),
        [
            draft(
                "transition",
                "code_complete",
                task_id=tid,
                source="Processing",
                target="TestValidation",
            )
        ],
    )


def build(root: Path, qid: str, entries: int) -> None:
    """A quest whose journal holds ``entries`` history entries (built without fsync)."""
    store = QuestStore(root, durable=False)
    with store.create(make_quest(qid)) as w:
        per_commit = 1 if entries <= 1000 else 100
        for i in range(entries // per_commit):
            q = w.quest
            tid = f"TASK-{i % N_TASKS + 1}"
            t = q.tasks[tid].model_copy(update={"agent_runs": i})
            batch = [
                draft("transition", "ward_failed", task_id=tid, detail={"i": i, "k": k})
                for k in range(per_commit)
            ]
            w.commit(q.model_copy(update={"tasks": {**q.tasks, tid: t}}), batch)
        assert w.quest.seq == entries


def timed_round(w: QuestWriter, commits: int, start: int) -> list[float]:
    samples = []
    clock = time.perf_counter_ns
    for i in range(start, start + commits):
        t0 = clock()
        one_transition(w, i)
        samples.append((clock() - t0) / 1000.0)
    return samples


def measure(root: Path, durable: bool, rounds: int, commits: int) -> dict[str, list[float]]:
    store = QuestStore(root, durable=durable)
    writers = {"short": store.open_writer("short"), "long": store.open_writer("long")}
    samples: dict[str, list[float]] = {name: [] for name in writers}
    try:
        for r in range(rounds):
            order = ["short", "long"] if r % 2 == 0 else ["long", "short"]
            for name in order:
                samples[name] += timed_round(writers[name], commits, r * commits)
    finally:
        for w in writers.values():
            w.close()
    return samples


def time_reads(store: QuestStore, n: int) -> dict[str, float]:
    """Median read() time of each quest, the two interleaved."""
    samples: dict[str, list[float]] = {"short": [], "long": []}
    for _ in range(n):
        for qid, xs in samples.items():
            t0 = time.perf_counter_ns()
            store.read(qid)
            xs.append((time.perf_counter_ns() - t0) / 1000.0)
    return {qid: statistics.median(xs) for qid, xs in samples.items()}


def p90(xs: list[float]) -> float:
    return statistics.quantiles(xs, n=10)[-1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="fewer, shorter rounds")
    parser.add_argument("--rounds", type=int, default=None, help="timed rounds per store")
    parser.add_argument("--commits", type=int, default=None, help="commits per round")
    args = parser.parse_args()
    rounds = args.rounds or (2 if args.quick else 4)
    commits = args.commits or (500 if args.quick else 2000)

    with tempfile.TemporaryDirectory(prefix="bench-store-") as tmp:
        root = Path(tmp)
        t0 = time.perf_counter()
        build(root, "short", SHORT)
        build(root, "long", LONG)
        built = time.perf_counter() - t0
        os.sync()  # flush the unsynced build now, not during the timed rounds
        journal_mb = (root / "long" / "journal.jsonl").stat().st_size / 1e6
        print(
            f"built stores in {built:.1f} s (long journal: {LONG:,} entries, {journal_mb:.1f} MB); "
            f"{rounds} interleaved rounds x {commits} commits per store and mode"
        )

        results: list[tuple[str, Callable[[], dict[str, list[float]]]]] = [
            ("fsync", lambda: measure(root, True, rounds, commits)),
            ("no fsync", lambda: measure(root, False, rounds, commits)),
        ]
        print()
        header = f"{'mode':<9} {'history':>9} {'median us':>10} {'p90 us':>9} {'mean us':>9}"
        print(header)
        print("-" * len(header))
        ratios = []
        for mode, run in results:
            s = run()
            for name, n in (("short", SHORT), ("long", LONG)):
                xs = s[name]
                print(
                    f"{mode:<9} {n:>9,} {statistics.median(xs):>10.1f} {p90(xs):>9.1f} "
                    f"{statistics.fmean(xs):>9.1f}"
                )
            med = statistics.median(s["long"]) / statistics.median(s["short"])
            mean = statistics.fmean(s["long"]) / statistics.fmean(s["short"])
            ratios.append((mode, med, mean))
        print()
        for mode, med, mean in ratios:
            verdict = "ok" if med <= 2 else "ABOVE TARGET"
            print(
                f"ratio long/short ({mode}): median {med:.2f}, mean {mean:.2f}  "
                f"(target <= 2: {verdict})"
            )

        # Reads while a writer is mid-way between snapshots (a 128-line tail to replay).
        store = QuestStore(root, snapshot_every=1_000_000, durable=False)
        for name in ("short", "long"):
            store.open_writer(name).close()  # closing brings the snapshot up to date
        writers = [store.open_writer("short"), store.open_writer("long")]
        for w in writers:
            for i in range(128):
                one_transition(w, i)
        reads = 21 if args.quick else 51
        read_med = time_reads(store, reads)
        r_short, r_long = read_med["short"], read_med["long"]
        for w in writers:
            w.close()
        print(
            f"read() median with a 128-line tail: {r_short:.0f} us at {SHORT} entries, "
            f"{r_long:.0f} us at {LONG:,} (ratio {r_long / r_short:.2f})"
        )


if __name__ == "__main__":
    main()
