"""Benchmark: the cost of a state commit with 1 vs 1,000 quests on the state branch, and
how much the branch grows per task.

A state commit (``StateBranch.publish``) hashes one quest's file, builds the tree in a
throw-away index from the tip's tree, commits and swaps the ref. The tree has one entry
per quest, so the question is whether a repository with a thousand quests (most of them
in ``quests/done/``) pays more per commit than one with a single quest. Both branches
are built first; then timed rounds alternate between them (which goes first alternates
too), each publishing a new version of one open quest's file. Reported: median and p90
per commit, and the ratio many/one (target <= 2).

Growth: a 20-task quest is published the way a run publishes it (a few commits per
task: started, waiting for approval, merged, plus interval commits), and the branch's
objects are packed; reported as bytes per task, loose and packed.

    .venv/bin/python bench/bench_state_branch.py [--quick] [--rounds N] [--commits N]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

from scaffold.core.states import Lifecycle
from scaffold.quest.model import HistoryEntry, PullRequest, Quest, QuestPhase, TaskRecord
from scaffold.state.branch import Publication, StateBranch
from scaffold.state.document import HistoryDigest, render

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *args], cwd=repo, check=True, capture_output=True, text=True
    ).stdout


def new_repo(root: Path) -> Path:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    git(
        root,
        "-c",
        "user.name=b",
        "-c",
        "user.email=b@b",
        "commit",
        "-q",
        "--allow-empty",
        "-m",
        "i",
    )
    return root


def quest(qid: str, seq: int, tasks: int = 5, phase: QuestPhase = QuestPhase.EXECUTING) -> Quest:
    records = {
        f"TASK-{i}": TaskRecord(id=f"TASK-{i}", title=f"task {i} of {qid}", state=Lifecycle.IDLE)
        for i in range(1, tasks + 1)
    }
    return Quest(
        id=qid, request=f"request of {qid}", seq=seq, started_at=T0, tasks=records, phase=phase
    )


def publication(q: Quest, digest: HistoryDigest | None = None) -> Publication:
    data = render(q, digest or HistoryDigest())
    return Publication(q.id, data, q.seq, q.phase is QuestPhase.DONE)


def build(root: Path, quests: int) -> StateBranch:
    repo = new_repo(root)
    branch = StateBranch(repo)
    pubs = [publication(quest("live", 1))]
    pubs += [publication(quest(f"old-{i}", 1, phase=QuestPhase.DONE)) for i in range(quests - 1)]
    branch.publish(pubs, "set up")
    return branch


def timed_commits(branch: StateBranch, start_seq: int, n: int) -> list[float]:
    times = []
    for i in range(n):
        q = quest("live", start_seq + i).model_copy(update={"cost_usd": 0.01 * (start_seq + i)})
        pub = publication(q)
        t0 = time.perf_counter()
        branch.publish([pub], f"live: progress {start_seq + i}")
        times.append(time.perf_counter() - t0)
    return times


def growth(root: Path, tasks: int) -> tuple[int, int, int]:
    """(commits, loose bytes, packed bytes) for one quest of ``tasks`` tasks."""
    repo = new_repo(root)
    branch = StateBranch(repo)
    q = quest("grow", 1, tasks=tasks)
    digest = HistoryDigest()
    seq = 1
    commits = 0

    def step(q: Quest, task_id: str, event: str, **update: object) -> Quest:
        nonlocal seq, commits
        seq += 1
        t = q.tasks[task_id].model_copy(update=update)
        q = q.model_copy(update={"seq": seq, "tasks": {**q.tasks, task_id: t}})
        digest.add(
            [
                HistoryEntry(
                    seq=seq,
                    at=T0 + timedelta(seconds=seq),
                    kind="transition",
                    task_id=task_id,
                    event=event,
                    source="Processing",
                    target="TestValidation",
                )
            ]
        )
        branch.publish([publication(q, digest)], f"grow: {event} {task_id}")
        commits += 1
        return q

    for i in range(1, tasks + 1):
        tid = f"TASK-{i}"
        q = step(q, tid, "task_selected", state=Lifecycle.PROCESSING)
        q = step(q, tid, "progress", state=Lifecycle.TEST_VALIDATION, cost_usd=0.1)
        pr = PullRequest(branch=f"scaffold/task-{i}", base="main", number=i)
        q = step(q, tid, "waits_for_approval", state=Lifecycle.PR_CREATED, pr=pr)
        q = step(q, tid, "merged", state=Lifecycle.IDLE, outcome="merged")
    loose = sum(
        int(line.split()[1]) * 1024
        for line in git(repo, "count-objects", "-v").splitlines()
        if line.startswith("size:")
    )
    git(repo, "repack", "-adq")
    packed = sum(p.stat().st_size for p in (repo / ".git" / "objects" / "pack").glob("*.pack"))
    return commits, loose, packed


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="fewer rounds (a smoke run)")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--commits", type=int, default=20, help="commits per round and branch")
    ap.add_argument("--quests", type=int, default=1000)
    ap.add_argument("--json", type=Path, default=None, help="also write the figures here")
    args = ap.parse_args()
    rounds = 2 if args.quick else args.rounds
    with tempfile.TemporaryDirectory(prefix="bench-state-") as tmp:
        one = build(Path(tmp) / "one", 1)
        many = build(Path(tmp) / "many", args.quests)
        samples: dict[str, list[float]] = {"one": [], "many": []}
        seq = 2
        for r in range(rounds):
            order = [("one", one), ("many", many)]
            if r % 2:
                order.reverse()
            for name, branch in order:
                samples[name] += timed_commits(branch, seq, args.commits)
            seq += args.commits
        print(f"state commit, {rounds} rounds x {args.commits} commits each, interleaved")
        print(f"{'quests on the branch':<22}{'median ms':>11}{'p90 ms':>9}")
        for name, label in (("one", "1"), ("many", str(args.quests))):
            xs = sorted(samples[name])
            print(
                f"{label:<22}{statistics.median(xs) * 1e3:>11.2f}{xs[int(len(xs) * 0.9)] * 1e3:>9.2f}"
            )
        ratio = statistics.median(samples["many"]) / statistics.median(samples["one"])
        print(f"ratio {args.quests}/1 (median): {ratio:.2f}  (target <= 2)")
        tasks = 20
        commits, loose, packed = growth(Path(tmp) / "grow", tasks)
        print(
            f"growth: one quest of {tasks} tasks, {commits} state commits: "
            f"{loose / tasks / 1024:.1f} KiB/task loose, {packed / tasks / 1024:.1f} KiB/task packed"
        )
        if args.json is not None:
            figures = {
                "rounds": rounds,
                "commits_per_round": args.commits,
                "quests": args.quests,
                "median_ms": {name: statistics.median(xs) * 1e3 for name, xs in samples.items()},
                "ratio_many_over_one": ratio,
                "growth": {
                    "tasks": tasks,
                    "state_commits": commits,
                    "loose_kib_per_task": loose / tasks / 1024,
                    "packed_kib_per_task": packed / tasks / 1024,
                },
            }
            args.json.write_text(json.dumps(figures, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    main()
