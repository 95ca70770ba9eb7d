"""Benchmark: committing an agent's work at a hand-off, on a repository of many files.

Between two agents scaffold commits the worktree (``Workspace.commit_all``) from an
index of its own. Built fresh from the tip (``read-tree``), that index has no stat data,
so ``git add -A`` reads and hashes every file of the repository at every hand-off. The
saved index (``.git/scaffold-indexes/``) keeps the stat data of the last commit, so only
the files whose stat changed are hashed.

The repository: ``--files`` files (default 5,000 in 50 folders, about 30 MB). Each round
an "agent" rewrites ``--touch`` files, then the commit is timed, after ``--gap`` seconds
(an agent run lasts longer than the one second the saved index re-hashes as too recent).
Timed, interleaved round by round:

- ``this``: ``commit_all`` of this checkout;
- ``baseline``: ``commit_all`` of another checkout (``--baseline DIR``, its ``app`` on
  ``PYTHONPATH``), in a child process of its own on its own copy of the repository;
- ``git_fresh`` / ``git_floor``: plain git on a third copy: ``read-tree`` + ``add -A`` +
  ``write-tree`` into a fresh index (what any commit from a fresh index pays), and
  ``add -A`` + ``write-tree`` on the worktree's own up-to-date index (the floor).

Usage::

    .venv/bin/python bench/bench_handoff_commit.py --baseline /path/to/other/checkout
    .venv/bin/python bench/bench_handoff_commit.py --files 20000 --rounds 8

Results go to ``bench/results/handoff_commit.json``.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from results_file import write_result

GIT_ID = ("-c", "user.name=bench", "-c", "user.email=bench@localhost")

# Runs in a child process per checkout: create the worktree, then on each line of stdin
# rewrite the named files, commit, and print the commit's milliseconds.
CHILD = """
import sys, time
from pathlib import Path
try:
    from scaffold.git.workspace import Workspace
except ImportError:  # a checkout from before git/worktrees.py was split
    from scaffold.git.worktrees import Workspace
ws = Workspace(Path(sys.argv[1]))
wt = ws.create_worktree("TASK-1")
print("ready", flush=True)
for line in sys.stdin:
    n, *names = line.split()
    for name in names:
        (wt / name).write_text(f"x = {n}\\n" * 1500)
    time.sleep(float(sys.argv[2]))
    t = time.perf_counter()
    ws.commit_all("TASK-1", f"round {n}")
    print((time.perf_counter() - t) * 1000, flush=True)
"""


def build_repo(root: Path, files: int) -> None:
    subprocess.run(["git", "init", "-q", "-b", "main", str(root)], check=True)
    per = 100
    for d in range(max(1, files // per)):
        folder = root / f"pkg{d}"
        folder.mkdir()
        for f in range(per):
            (folder / f"m{f}.py").write_text(f"x = {f}\n" * 1500)
    subprocess.run(["git", "add", "-A"], cwd=root, check=True)
    subprocess.run(["git", *GIT_ID, "commit", "-qm", "files"], cwd=root, check=True)


def clone(src: Path, dst: Path) -> Path:
    subprocess.run(["git", "clone", "-q", "--no-hardlinks", str(src), str(dst)], check=True)
    return dst


class Child:
    def __init__(self, repo: Path, app: Path, gap: float) -> None:
        env = {**os.environ, "PYTHONPATH": str(app)}
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(repo), str(gap)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )
        assert self.proc.stdout is not None
        assert self.proc.stdout.readline().strip() == "ready"

    def round(self, n: int, names: list[str]) -> float:
        assert self.proc.stdin is not None
        assert self.proc.stdout is not None
        self.proc.stdin.write(f"{n} {' '.join(names)}\n")
        self.proc.stdin.flush()
        return float(self.proc.stdout.readline())

    def close(self) -> None:
        assert self.proc.stdin is not None
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def git_round(repo: Path, n: int, names: list[str], gap: float, fresh: bool) -> float:
    for name in names:
        (repo / name).write_text(f"x = {n}\n" * 1500)
    time.sleep(gap)
    with tempfile.TemporaryDirectory() as tmp:
        index = Path(tmp) / "index"
        env = {**os.environ, "GIT_INDEX_FILE": str(index if fresh else repo / ".git" / "index")}
        t = time.perf_counter()
        if fresh:
            subprocess.run(["git", "read-tree", "HEAD"], cwd=repo, env=env, check=True)
        subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True)
        subprocess.run(["git", "write-tree"], cwd=repo, env=env, check=True, capture_output=True)
        return (time.perf_counter() - t) * 1000


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--files", type=int, default=5000)
    ap.add_argument("--touch", type=int, default=3, help="files an agent rewrites per round")
    ap.add_argument("--rounds", type=int, default=6)
    ap.add_argument("--gap", type=float, default=1.2, help="seconds between write and commit")
    ap.add_argument("--baseline", type=Path, help="another checkout of scaffold")
    ap.add_argument("--no-save", action="store_true")
    args = ap.parse_args()
    here = Path(__file__).resolve().parent.parent / "app"
    with tempfile.TemporaryDirectory(prefix="bench-commit-", dir=Path.cwd()) as tmp_name:
        tmp = Path(tmp_name)
        t0 = time.perf_counter()
        build_repo(tmp / "src", args.files)
        print(f"built {args.files} files in {time.perf_counter() - t0:.1f} s", flush=True)
        children = {"this": Child(clone(tmp / "src", tmp / "this"), here, args.gap)}
        if args.baseline:
            base = clone(tmp / "src", tmp / "base")
            children["baseline"] = Child(base, args.baseline / "app", args.gap)
        plain = clone(tmp / "src", tmp / "plain")
        times: dict[str, list[float]] = {k: [] for k in [*children, "git_fresh", "git_floor"]}
        # Round 0 is the worktree's first commit (its files were all just checked out).
        for n in range(args.rounds + 1):
            names = [f"pkg{(n * 7 + i) % 50}/m{(n * 13 + i) % 100}.py" for i in range(args.touch)]
            order = list(times)
            for key in order[n % len(order) :] + order[: n % len(order)]:
                if key in children:
                    ms = children[key].round(n, names)
                else:
                    ms = git_round(plain, n, names, args.gap, fresh=key == "git_fresh")
                if n:
                    times[key].append(ms)
            print(f"round {n}: " + ", ".join(f"{k} {v[-1]:.0f}" for k, v in times.items() if v))
        for child in children.values():
            child.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    ratios = {f"{k}_to_git_floor": v / med["git_floor"] for k, v in med.items()}
    if "baseline" in med:
        ratios["this_to_baseline"] = med["this"] / med["baseline"]
    print(f"\n{args.files} files, {args.touch} rewritten per round, {args.rounds} rounds")
    print(f"{'':14s} {'median ms':>10s} {'x git floor':>12s}")
    for key, value in med.items():
        print(f"{key:14s} {value:10.1f} {value / med['git_floor']:12.2f}")
    if "baseline" in med:
        print(f"this / baseline: {ratios['this_to_baseline']:.3f}")
    result: dict[str, Any] = {
        "files": args.files,
        "touched_per_round": args.touch,
        "rounds": args.rounds,
        "median_ms": med,
        "all_ms": times,
        "ratios": ratios,
        "baseline": str(args.baseline) if args.baseline else None,
    }
    if not args.no_save:
        print(f"wrote {write_result('handoff_commit', result)}")


if __name__ == "__main__":
    main()
