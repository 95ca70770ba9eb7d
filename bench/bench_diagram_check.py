"""Benchmark: DiagramCheck on a 2,000-file diff next to plain ``git diff --name-status``.

Builds a repository whose base commit holds ``--modified`` modules (a dataclass, a
pydantic model and an Enum each, plus filler code) and whose head commit changes
every one of them (a field added, a field retyped, an Enum member added) and adds
``--added`` new modules (a dataclass and a function each). The head also updates
the diagrams with ``scaffold diagrams generate --write``, so the checker does the
full work: parse both sides of every file, compare, then look every name up in the
diagrams (the run ends synced, which is the expensive path).

Timed, interleaved rounds (the order rotates each round):

- ``git_diff``: ``git diff --name-status -M base head`` as a subprocess, the floor
  any diff-based check pays;
- ``analyzer``: ``scaffold.diagramcheck.analyze`` in this process;
- ``cli``: ``python -m scaffold diagram-check --format json`` as a subprocess
  (interpreter start and imports included).

Reported: the median wall time of each and the ratios to ``git_diff``; the analyzer's
peak Python allocation (tracemalloc, one extra run) and the peak RSS of the CLI child
(``ru_maxrss`` from ``wait4``); the number of git processes the analyzer starts.

    .venv/bin/python bench/bench_diagram_check.py [--quick] [--rounds N]

Results go to stdout and, as JSON, to ``bench/results/diagram_check.json``
(``--no-save`` to skip).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scaffold.diagramcheck import analyze

RESULTS = Path(__file__).resolve().parent / "results" / "diagram_check.json"
IDENTITY = ("-c", "user.name=Bench", "-c", "user.email=bench@localhost")
FILLER = "".join(
    f"\n\ndef helper_{i}(x: int) -> int:\n    return x * {i} + len(str(x))\n" for i in range(12)
)


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *IDENTITY, *args], cwd=root, check=True, capture_output=True, text=True
    ).stdout.strip()


def module(i: int, changed: bool) -> str:
    extra_field = f"    note_{i}: str = ''\n" if changed else ""
    retyped = "float" if changed else "int"
    member = f"    ARCHIVED_{i} = 'archived_{i}'\n" if changed else ""
    return (
        "from dataclasses import dataclass\nfrom enum import Enum\n\n"
        "from pydantic import BaseModel\n\n\n"
        f"@dataclass\nclass Item{i}:\n    id: int\n    size: {retyped}\n{extra_field}\n\n"
        f"class Payload{i}(BaseModel):\n    item: Item{i}\n    tags: list[str]\n\n\n"
        f"class Kind{i}(Enum):\n    SMALL_{i} = 'small_{i}'\n    LARGE_{i} = 'large_{i}'\n{member}"
        + FILLER
    )


def new_module(i: int) -> str:
    return (
        "from dataclasses import dataclass\n\n\n"
        f"@dataclass\nclass Fresh{i}:\n    name: str\n    count: int\n\n\n"
        f"def make_{i}() -> Fresh{i}:\n    return Fresh{i}('x', {i})\n" + FILLER
    )


def build(root: Path, modified: int, added: int) -> tuple[str, str]:
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    pkg = root / "src" / "big"
    for sub in range(20):
        (pkg / f"p{sub}").mkdir(parents=True)
        (pkg / f"p{sub}" / "__init__.py").write_text("", encoding="utf-8")
    (pkg / "__init__.py").write_text("", encoding="utf-8")
    for i in range(modified):
        (pkg / f"p{i % 20}" / f"m{i}.py").write_text(module(i, False), encoding="utf-8")
    docs = root / "docs" / "diagrams"
    docs.mkdir(parents=True)
    for name in ("02-architecture", "03-state-machine", "04-roadmap", "05-data-model"):
        (docs / f"{name}.md").write_text(f"# {name}\n\n```mermaid\nflowchart LR\n  a\n```\n")
    cli = [sys.executable, "-m", "scaffold", "diagrams", "generate", "--write", "--repo", str(root)]
    subprocess.run(cli, check=True, capture_output=True)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "base")
    base = git(root, "rev-parse", "HEAD")
    for i in range(modified):
        (pkg / f"p{i % 20}" / f"m{i}.py").write_text(module(i, True), encoding="utf-8")
    for i in range(added):
        (pkg / f"p{i % 20}" / f"n{i}.py").write_text(new_module(i), encoding="utf-8")
    subprocess.run(cli, check=True, capture_output=True)
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "head")
    return base, git(root, "rev-parse", "HEAD")


def run_child(argv: list[str], cwd: Path) -> tuple[float, int, int]:
    """Wall time, exit code and peak RSS (KiB) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    _, status, usage = os.wait4(proc.pid, 0)
    elapsed = time.perf_counter() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    return elapsed, proc.returncode, usage.ru_maxrss


def count_git_processes(root: Path, base: str, head: str) -> int:
    """How many git processes one analysis starts (subprocess calls are counted)."""
    import subprocess as sp

    calls = 0
    real_run, real_popen = sp.run, sp.Popen

    class CountingPopen(real_popen):  # type: ignore[misc, valid-type]
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            nonlocal calls
            calls += 1
            super().__init__(*args, **kwargs)

    sp.Popen = CountingPopen  # type: ignore[misc]
    try:
        analyze(root, base, head)
    finally:
        sp.Popen = real_popen  # type: ignore[misc]
        sp.run = real_run
    return calls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a smaller diff, fewer rounds")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--modified", type=int, default=None, help="modules changed")
    parser.add_argument("--added", type=int, default=None, help="modules added")
    parser.add_argument("--no-save", action="store_true")
    args = parser.parse_args()
    modified = args.modified or (200 if args.quick else 1000)
    added = args.added or (200 if args.quick else 1000)
    rounds = args.rounds or (3 if args.quick else 7)
    tmp = Path(tempfile.mkdtemp(prefix="bench-diagramcheck-"))
    try:
        root = tmp / "repo"
        t0 = time.perf_counter()
        base, head = build(root, modified, added)
        print(f"built {modified} modified + {added} new modules in {time.perf_counter() - t0:.1f}s")
        names = git(root, "diff", "--name-status", base, head).splitlines()
        py_changed = sum(1 for line in names if line.endswith(".py"))
        report = analyze(root, base, head)
        print(f"diff: {len(names)} files ({py_changed} .py); findings: {len(report.findings)}")
        if report.blocking:
            raise SystemExit("the generated diagrams should satisfy the check")

        cli = [sys.executable, "-m", "scaffold", "diagram-check", "--base", base, "--head", head]
        cli += ["--format", "json"]
        runners: dict[str, Callable[[], tuple[float, int]]] = {
            "git_diff": lambda: run_child(["git", "diff", "--name-status", "-M", base, head], root)[
                :2
            ],
            "analyzer": lambda: _timed(lambda: analyze(root, base, head)),
            "cli": lambda: run_child(cli, root)[:2],
        }
        times: dict[str, list[float]] = {k: [] for k in runners}
        order = list(runners)
        for r in range(rounds):
            for name in order[r % len(order) :] + order[: r % len(order)]:
                elapsed, code = runners[name]()
                if code != 0:
                    raise SystemExit(f"{name} exited {code}")
                times[name].append(elapsed)
        med = {k: statistics.median(v) for k, v in times.items()}
        tracemalloc.start()
        analyze(root, base, head)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        rss = run_child(cli, root)[2]
        baseline_rss = run_child([sys.executable, "-c", "import scaffold.cli.main"], root)[2]
        processes = count_git_processes(root, base, head)
        result = {
            "changed_files": len(names),
            "changed_python_files": py_changed,
            "modified_modules": modified,
            "added_modules": added,
            "rounds": rounds,
            "median_s": med,
            "ratio_analyzer_to_git_diff": med["analyzer"] / med["git_diff"],
            "ratio_cli_to_git_diff": med["cli"] / med["git_diff"],
            "analyzer_peak_tracemalloc_mb": peak / 1e6,
            "cli_peak_rss_mb": rss / 1024,
            "cli_imports_only_peak_rss_mb": baseline_rss / 1024,
            "git_processes_per_analysis": processes,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
        }
        for k, v in med.items():
            print(f"{k:>9}: median {v * 1000:8.1f} ms over {rounds} rounds")
        print(
            f"analyzer / git diff: {result['ratio_analyzer_to_git_diff']:.1f}x; "
            f"cli / git diff: {result['ratio_cli_to_git_diff']:.1f}x"
        )
        print(
            f"analyzer peak (tracemalloc): {result['analyzer_peak_tracemalloc_mb']:.1f} MB; "
            f"CLI peak RSS: {result['cli_peak_rss_mb']:.1f} MB "
            f"(imports alone {result['cli_imports_only_peak_rss_mb']:.1f} MB); "
            f"git processes per analysis: {processes}"
        )
        if not args.no_save and not args.quick:
            RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
            print(f"saved {RESULTS}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _timed(fn: Callable[[], object]) -> tuple[float, int]:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start, 0


if __name__ == "__main__":
    main()
