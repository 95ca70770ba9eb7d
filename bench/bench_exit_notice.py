"""Benchmark: agent exit -> scaffold notices it, without the sandbox or git around it.

A child writes ``time.time()`` to a file just before ``os._exit(0)``; the parent notes
the time at which it learns of the exit. Three ways, interleaved run by run so a busy
machine weighs on each alike:

- ``watched``: what `run_agent` does now, :func:`scaffold.agent.process_group.spawn_watched`
  and ``_wait_exited`` (the protocol's ``process_exited`` resolves a future), then the
  group check (``killpg(pgid, 0)`` says the group is empty);
- ``poll_25ms``: what it did before: ``asyncio.create_subprocess_exec`` and a loop that
  sleeps 25 ms until ``returncode`` is set, then the same group check;
- ``proc_scan``: ``watched``, plus one scan of /proc for the group, the cost the fast
  path avoids (``_group_alive`` before it knew the leader was reaped).

Usage::

    .venv/bin/python bench/bench_exit_notice.py            # 60 runs of each
    .venv/bin/python bench/bench_exit_notice.py --runs 200

Results go to ``bench/results/exit_notice.json``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

from results_file import write_result

from scaffold.agent import process_group as process

RESULTS = Path(__file__).resolve().parent / "results"
CHILD = "import os, sys, time\ntime.sleep(0.02)\nopen(sys.argv[1], 'w').write(repr(time.time()))\nos._exit(0)\n"


async def watched(mark: Path) -> float:
    proc = await process.spawn_watched(
        sys.executable, "-c", CHILD, str(mark), start_new_session=True
    )
    await process._wait_exited(proc)
    process._group_alive(proc.pid)
    return time.time()


async def poll_25ms(mark: Path) -> float:
    proc = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CHILD, str(mark), start_new_session=True
    )
    while proc.returncode is None:
        await asyncio.sleep(0.025)
    process._group_alive(proc.pid)
    return time.time()


async def proc_scan(mark: Path) -> float:
    proc = await process.spawn_watched(
        sys.executable, "-c", CHILD, str(mark), start_new_session=True
    )
    await process._wait_exited(proc)
    process._has_live_member(proc.pid)
    return time.time()


WAYS: dict[str, Callable[[Path], Awaitable[float]]] = {
    "watched": watched,
    "poll_25ms": poll_25ms,
    "proc_scan": proc_scan,
}


def summary(xs: list[float]) -> dict[str, float]:
    xs = sorted(xs)
    return {
        "n": len(xs),
        "median_ms": 1000 * statistics.median(xs),
        "p95_ms": 1000 * xs[min(len(xs) - 1, round(0.95 * (len(xs) - 1)))],
        "max_ms": 1000 * xs[-1],
    }


async def measure(runs: int, tmp: Path) -> dict[str, dict[str, float]]:
    gaps: dict[str, list[float]] = {name: [] for name in WAYS}
    for i in range(runs):
        for name, way in WAYS.items():
            mark = tmp / f"{name}-{i}"
            seen = await way(mark)
            gaps[name].append(seen - float(mark.read_text()))
    return {name: summary(xs) for name, xs in gaps.items()}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--runs", type=int, default=60)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-exit-") as tmp:
        result: dict[str, Any] = {"runs": args.runs, "exit_to_noticed": {}}
        result["exit_to_noticed"] = asyncio.run(measure(args.runs, Path(tmp)))
    print(f"{'agent exit -> noticed (ms)':<28} {'n':>4} {'median':>8} {'p95':>8} {'max':>8}")
    for name, s in result["exit_to_noticed"].items():
        print(
            f"{name:<28} {s['n']:>4} {s['median_ms']:>8.2f} {s['p95_ms']:>8.2f} {s['max_ms']:>8.2f}"
        )
    print(f"\nwrote {write_result('exit_notice', result)}")


if __name__ == "__main__":
    main()
