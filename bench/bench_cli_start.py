"""Benchmark: the start of a ``scaffold`` command that runs no agent.

``scaffold status``, ``answer``, ``review``, ``approve`` and the Action's steps start a
Python process, do a little and end; a person waits for each. The mcp SDK (about half a
second of imports) is needed only by an agent run's ``signal-back`` endpoint, so these
commands must not load it. Two ways, interleaved run by run so a busy machine weighs on
each alike:

- ``cli``: ``python -m scaffold --help`` as it is;
- ``cli_with_mcp``: the same after importing the endpoint module first, which is what
  every command paid while the CLI's imports reached the endpoint (the baseline).

Usage::

    .venv/bin/python bench/bench_cli_start.py            # 15 runs of each
    .venv/bin/python bench/bench_cli_start.py --runs 40

Results go to ``bench/results/cli_start.json``.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time

from results_file import write_result

WAYS = {
    "cli": "import runpy, sys; sys.argv = ['scaffold', '--help']; runpy.run_module('scaffold', run_name='__main__')",
    "cli_with_mcp": (
        "import scaffold.signal_back.endpoint, runpy, sys; sys.argv = ['scaffold', '--help'];"
        " runpy.run_module('scaffold', run_name='__main__')"
    ),
}


def once(code: str) -> float:
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", code], check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15)
    args = parser.parse_args()
    times: dict[str, list[float]] = {name: [] for name in WAYS}
    for code in WAYS.values():
        once(code)  # warm the page cache and the bytecode
    for _ in range(args.runs):
        for name, code in WAYS.items():
            times[name].append(once(code))
    medians = {name: statistics.median(t) for name, t in times.items()}
    result = {
        "runs": args.runs,
        "median_s": {name: round(m, 4) for name, m in medians.items()},
        "ratio_cli_to_baseline": round(medians["cli"] / medians["cli_with_mcp"], 3),
    }
    path = write_result("cli_start", result)
    for name, m in medians.items():
        print(f"{name:14} median {m * 1000:7.1f} ms")
    print(f"cli / cli_with_mcp = {result['ratio_cli_to_baseline']}  ({path})")


if __name__ == "__main__":
    main()
