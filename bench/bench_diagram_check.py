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
- ``analyzer_cold`` / ``analyzer_warm``: ``scaffold.diagramcheck.analyze`` in this
  process, without and with the parse cache of the repository (cold: the cache file
  deleted and the in-process lru caches cleared first; warm: the cache a previous run
  of the same diff left, as for a re-check);
- ``cli_cold`` / ``cli_warm``: ``python -m scaffold diagram-check --format json`` as a
  subprocess (interpreter start and imports included), without any cache and right
  after the same command ran (as for a re-check: the analyzer's cache is warm);
- ``cli_warm_analyzer``: the CLI with the analyzer's caches warm from a check of the
  same diff in this process;
- ``analyzer_after_push`` / ``cli_after_push``: the cache warm from checking the head,
  then a push (one more commit editing one module) checked: what a re-check after a
  push costs (every other blob comes from the cache, the rules run in full);
- ``cli_small`` and ``git_diff_small``: the CLI and ``git diff`` on a one-file change on
  top of the head (the target: 150 ms wall for the CLI, median and p90).

With ``--baseline DIR`` (another checkout of scaffold, e.g. a ``git worktree`` of the
commit before a change), the same rounds also time that code side by side, interleaved
with this one's: ``base_analyzer_cold``/``base_analyzer_warm`` and, for the same
measurement on both sides, ``sub_analyzer_cold``/``sub_analyzer_warm`` (this code), each
timed inside a fresh interpreter (``PYTHONPATH=DIR/app`` for the baseline), and
``base_cli_cold``/``base_cli_warm``/``base_cli_small``, the baseline's CLI on its own copy
of the repository (each version keeps its own cache files, which the other would delete).

Reported: the median (and p90) wall time of each and the ratios to ``git_diff`` (targets:
analyzer cold at most 100x, analyzer and CLI warm at most 10x); the analyzer's peak Python allocation (tracemalloc,
one extra cold run) and the peak RSS of the CLI child (``ru_maxrss`` from ``wait4``);
the number of git processes the analyzer starts. RSS is measured from a small
launcher (Linux keeps the high-water mark across ``execve``). The package is byte-compiled first
(``compileall``), as an installed one is, so ``PYTHONDONTWRITEBYTECODE`` in the
environment does not turn every CLI start into a compile.

    .venv/bin/python bench/bench_diagram_check.py [--quick] [--rounds N] [--baseline DIR]

Results go to stdout and, as JSON, to ``bench/results/diagram_check.json``
(``--no-save`` to skip).
"""

from __future__ import annotations

import argparse
import compileall
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

import scaffold
from scaffold.diagramcheck.analyzer import analyze

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


_LAUNCHER = (
    "import os, subprocess, sys\n"
    "p = subprocess.Popen(sys.argv[1:], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)\n"
    "_, status, usage = os.wait4(p.pid, 0)\n"
    "print(usage.ru_maxrss)\n"
)


def peak_rss_kib(argv: list[str], cwd: Path) -> int:
    """Peak RSS (KiB) of ``argv``, started from a small launcher.

    Linux keeps a process's RSS high-water mark across ``execve``, so a child forked
    straight from this (large) benchmark process would report this process's size; a
    grandchild forked from a fresh interpreter reports its own.
    """
    out = subprocess.run(
        [sys.executable, "-c", _LAUNCHER, *argv],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=True,
    )
    return int(out.stdout.strip() or 0)


def run_child(
    argv: list[str], cwd: Path, env: dict[str, str] | None = None
) -> tuple[float, int, int]:
    """Wall time, exit code and peak RSS (KiB) of one child process."""
    start = time.perf_counter()
    proc = subprocess.Popen(
        argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env
    )
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


def small_change(root: Path, head: str) -> str:
    """One module's helper edited on top of ``head`` (no diagram needed): the small diff."""
    path = root / "src" / "big" / "p0" / "m0.py"
    path.write_text(path.read_text(encoding="utf-8") + "\n\ndef extra() -> int:\n    return 1\n")
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", "small")
    return git(root, "rev-parse", "HEAD")


def push(root: Path, n: int) -> str:
    """Another commit on top of the branch: one module edited (a push to the pull request)."""
    path = root / "src" / "big" / "p1" / "m1.py"
    path.write_text(
        path.read_text(encoding="utf-8") + f"\n\ndef pushed_{n}() -> int:\n    return {n}\n"
    )
    git(root, "add", "-A")
    git(root, "commit", "-q", "-m", f"push {n}")
    return git(root, "rev-parse", "HEAD")


# One analysis timed inside a fresh interpreter (the code on its PYTHONPATH): cold (no
# cache file) or warm (after a first analysis of the same diff).
_TIMER = """
import shutil, sys, time
from pathlib import Path
from scaffold.diagramcheck.analyzer import analyze
root, base, head, mode = Path(sys.argv[1]), sys.argv[2], sys.argv[3], sys.argv[4]
if mode == "cold":
    shutil.rmtree(root / ".git" / "scaffold", ignore_errors=True)
else:
    analyze(root, base, head)
start = time.perf_counter()
analyze(root, base, head)
print(time.perf_counter() - start)
"""


def timed_in_child(app: Path, root: Path, base: str, head: str, mode: str) -> tuple[float, int]:
    env = {**os.environ, "PYTHONPATH": str(app)}
    out = subprocess.run(
        [sys.executable, "-c", _TIMER, str(root), base, head, mode],
        cwd=root,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if out.returncode != 0:
        return 0.0, out.returncode
    return float(out.stdout.strip().splitlines()[-1]), 0


def forget(root: Path) -> None:
    """Make the next analysis cold: no cache files (an older scaffold's, for --baseline)."""
    shutil.rmtree(root / ".git" / "scaffold", ignore_errors=True)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="a smaller diff, fewer rounds")
    parser.add_argument("--rounds", type=int, default=None)
    parser.add_argument("--modified", type=int, default=None, help="modules changed")
    parser.add_argument("--added", type=int, default=None, help="modules added")
    parser.add_argument("--no-save", action="store_true")
    parser.add_argument(
        "--baseline",
        type=Path,
        default=None,
        help="another scaffold checkout to time side by side (its app/ on PYTHONPATH)",
    )
    args = parser.parse_args()
    modified = args.modified or (200 if args.quick else 1000)
    added = args.added or (200 if args.quick else 1000)
    rounds = args.rounds or (3 if args.quick else 11)
    compileall.compile_dir(Path(scaffold.__file__).parent, quiet=1)
    own_app = Path(scaffold.__file__).resolve().parents[1]
    base_app = args.baseline.resolve() / "app" if args.baseline else None
    if base_app is not None:
        compileall.compile_dir(base_app / "scaffold", quiet=1)
    tmp = Path(tempfile.mkdtemp(prefix="bench-diagramcheck-"))
    try:
        root = tmp / "repo"
        t0 = time.perf_counter()
        base, head = build(root, modified, added)
        small = small_change(root, head)
        git(root, "checkout", "-q", "-b", "pushes", head)
        print(f"built {modified} modified + {added} new modules in {time.perf_counter() - t0:.1f}s")
        names = git(root, "diff", "--name-status", base, head).splitlines()
        py_changed = sum(1 for line in names if line.endswith(".py"))
        forget(root)
        report = analyze(root, base, head)
        print(f"diff: {len(names)} files ({py_changed} .py); findings: {len(report.findings)}")
        if report.blocking:
            raise SystemExit("the generated diagrams should satisfy the check")

        cli = [sys.executable, "-m", "scaffold", "diagram-check", "--base", base, "--head", head]
        cli += ["--format", "json"]
        cli_small = [sys.executable, "-m", "scaffold", "diagram-check", "--base", head]
        cli_small += ["--head", small, "--format", "json"]
        diff = ["git", "diff", "--name-status", "-M"]

        def cold_cli() -> tuple[float, int]:
            forget(root)
            return run_child(cli, root)[:2]

        def cold_analyzer() -> tuple[float, int]:
            forget(root)
            return _timed(lambda: analyze(root, base, head))

        def warm_analyzer() -> tuple[float, int]:
            analyze(root, base, head)  # leaves the cache this diff needs
            return _timed(lambda: analyze(root, base, head))

        def warm_cli() -> tuple[float, int]:
            run_child(cli, root)  # the same command before: its output is stored
            return run_child(cli, root)[:2]

        def warm_cli_analyzer() -> tuple[float, int]:
            analyze(root, base, head)  # the analyzer's caches warm for this diff
            return run_child(cli, root)[:2]

        pushes = iter(range(10**6))

        def after_push_analyzer() -> tuple[float, int]:
            analyze(root, base, head)
            new_head = push(root, next(pushes))
            return _timed(lambda: analyze(root, base, new_head))

        def after_push_cli() -> tuple[float, int]:
            analyze(root, base, head)
            new_head = push(root, next(pushes))
            argv = [*cli[:-4], "--head", new_head, "--format", "json"]
            return run_child(argv, root)[:2]

        runners: dict[str, Callable[[], tuple[float, int]]] = {}
        if base_app is not None:
            # The baseline on a copy of the repository: its own cache files.
            base_root = tmp / "repo-baseline"
            shutil.copytree(root, base_root, symlinks=True)
            base_env = {**os.environ, "PYTHONPATH": str(base_app)}

            def base_cli_cold() -> tuple[float, int]:
                shutil.rmtree(base_root / ".git" / "scaffold", ignore_errors=True)
                return run_child(cli, base_root, base_env)[:2]

            def base_cli_warm() -> tuple[float, int]:
                run_child(cli, base_root, base_env)
                return run_child(cli, base_root, base_env)[:2]

            runners.update(
                {
                    "base_analyzer_cold": lambda: timed_in_child(
                        base_app, base_root, base, head, "cold"
                    ),
                    "sub_analyzer_cold": lambda: timed_in_child(own_app, root, base, head, "cold"),
                    "base_analyzer_warm": lambda: timed_in_child(
                        base_app, base_root, base, head, "warm"
                    ),
                    "sub_analyzer_warm": lambda: timed_in_child(own_app, root, base, head, "warm"),
                    "base_cli_cold": base_cli_cold,
                    "base_cli_warm": base_cli_warm,
                    "base_cli_small": lambda: run_child(cli_small, base_root, base_env)[:2],
                }
            )
        runners |= {
            "git_diff": lambda: run_child([*diff, base, head], root)[:2],
            "analyzer_cold": cold_analyzer,
            "analyzer_warm": warm_analyzer,
            "cli_cold": cold_cli,
            "cli_warm": warm_cli,
            "cli_warm_analyzer": warm_cli_analyzer,
            "analyzer_after_push": after_push_analyzer,
            "cli_after_push": after_push_cli,
            "git_diff_small": lambda: run_child([*diff, head, small], root)[:2],
            "cli_small": lambda: run_child(cli_small, root)[:2],
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
        p90 = {k: _p90(v) for k, v in times.items()}
        forget(root)
        tracemalloc.start()
        analyze(root, base, head)
        _, peak = tracemalloc.get_traced_memory()
        tracemalloc.stop()
        forget(root)
        rss = peak_rss_kib(cli, root)
        rss_small = peak_rss_kib(cli_small, root)
        baseline_rss = peak_rss_kib([sys.executable, "-c", "import scaffold.cli.main"], root)
        processes = count_git_processes(root, base, head)
        ratio = {
            f"{k}_to_git_diff": med[k] / med["git_diff"]
            for k in (
                "analyzer_cold",
                "analyzer_warm",
                "analyzer_after_push",
                "cli_cold",
                "cli_warm",
                "cli_warm_analyzer",
                "cli_after_push",
            )
        }
        result = {
            "changed_files": len(names),
            "changed_python_files": py_changed,
            "modified_modules": modified,
            "added_modules": added,
            "rounds": rounds,
            "median_s": med,
            "p90_s": p90,
            "ratios": ratio,
            "cli_small_ms": med["cli_small"] * 1000,
            "cli_small_p90_ms": p90["cli_small"] * 1000,
            "cli_small_to_git_diff_small": med["cli_small"] / med["git_diff_small"],
            "analyzer_peak_tracemalloc_mb": peak / 1e6,
            "cli_peak_rss_mb": rss / 1024,
            "cli_small_peak_rss_mb": rss_small / 1024,
            "full_cli_imports_only_peak_rss_mb": baseline_rss / 1024,
            "git_processes_per_analysis": processes,
            "python": platform.python_version(),
            "cpus": os.cpu_count(),
            # Other work on the machine inflates every wall time (the side by side
            # rows share it): the 1-minute load average when the rounds ended.
            "load_average_1m": os.getloadavg()[0],
        }
        if base_app is not None:
            result["baseline"] = str(args.baseline)
            result["baseline_ratios"] = {
                f"{k}_to_git_diff": med[k] / med["git_diff"]
                for k in med
                if k.startswith(("base_", "sub_"))
            }
        for k, v in med.items():
            print(
                f"{k:>19}: median {v * 1000:8.1f} ms, p90 {p90[k] * 1000:8.1f} ms ({rounds} runs)"
            )
        print(
            "ratios to git diff: "
            + "; ".join(f"{k.removesuffix('_to_git_diff')} {v:.0f}x" for k, v in ratio.items())
            + " (targets: cold <= 100x, warm <= 10x)"
        )
        if base_app is not None:
            print(
                "side by side, x git diff (baseline -> this code): "
                + "; ".join(
                    f"{k} {med['base_' + k] / med['git_diff']:.0f}x -> "
                    f"{med[('sub_' if k.startswith('analyzer') else '') + k] / med['git_diff']:.0f}x"
                    for k in ("analyzer_cold", "analyzer_warm", "cli_cold", "cli_warm")
                )
                + f"; cli_small {med['base_cli_small'] * 1000:.0f} -> "
                f"{med['cli_small'] * 1000:.0f} ms median, {p90['base_cli_small'] * 1000:.0f} -> "
                f"{p90['cli_small'] * 1000:.0f} ms p90"
            )
        print(
            f"small diff: CLI {med['cli_small'] * 1000:.0f} ms median, "
            f"{p90['cli_small'] * 1000:.0f} ms p90 (target <= 150 ms), "
            f"{result['cli_small_to_git_diff_small']:.0f}x git diff"
        )
        print(
            f"analyzer peak (tracemalloc): {result['analyzer_peak_tracemalloc_mb']:.1f} MB; "
            f"CLI peak RSS: {result['cli_peak_rss_mb']:.1f} MB cold, "
            f"{result['cli_small_peak_rss_mb']:.1f} MB on the small diff "
            f"(the full CLI's imports alone {result['full_cli_imports_only_peak_rss_mb']:.1f} MB); "
            f"git processes per analysis: {processes}"
        )
        if not args.no_save and not args.quick:
            RESULTS.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
            print(f"saved {RESULTS}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _p90(values: list[float]) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, -(-9 * len(ordered) // 10) - 1))]


def _timed(fn: Callable[[], object]) -> tuple[float, int]:
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start, 0


if __name__ == "__main__":
    main()
