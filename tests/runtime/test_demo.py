"""``scaffold demo`` goes through every path it promises and ends with everything Done,
run the way a newcomer may have installed it: a virtualenv under ``/tmp``, which the
sandbox (on wherever bubblewrap is, as in CI) hides behind a fresh tmpfs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from harness import git
from installed_under_tmp import real_tmp_dir, scaffold_venv
from scaffold import backlog as bl
from scaffold.sandbox.settings import find_bwrap


@pytest.mark.timeout(600)
def test_demo_runs_every_path_to_done(tmp_path: Path) -> None:
    with real_tmp_dir(tmp_path) as root:
        _demo(root)


def _demo(root: Path) -> None:
    python = scaffold_venv(root) / "bin" / "python3"
    # scaffold from that venv alone (no PYTHONPATH), and no operator settings of this run.
    env = {k: v for k, v in os.environ.items() if not k.startswith("SCAFFOLD_")}
    env.pop("PYTHONPATH", None)
    repo = root / "demo"
    proc = subprocess.run(
        [str(python), "-m", "scaffold", "demo", "--dir", str(repo)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
        env=env,
        cwd=root,
    )
    out = proc.stdout
    assert proc.returncode == 0, out[-4000:] + proc.stderr[-4000:]
    if find_bwrap() is not None:
        assert "WITHOUT a sandbox" not in out + proc.stderr
    for path in (
        "QUESTION q-1-1",  # a question ...
        "answer to q-1-1 received; resuming the session",  # ... answered, same session
        "TASK-2: continue_role",  # partially-complete continuation
        "TASK-3: TestValidation -> Processing (ward_failed)",  # Ward failure -> Spiritmender
        "TASK-4: agent_failed",  # a crash, retried
        "TASK-5: DiagramCheck -> Blocked (diagrams_missing)",  # diagram block ...
        "TASK-5: Blocked -> Processing (diagrams_updated)",  # ... then fix
        "TASK-6: TestValidation -> Processing (role_followup)",  # follow-up with resume
        "TASK-6: Processing -> TestValidation (followup_done)",
        "demo finished: every task merged and Done",
    ):
        assert path in out, path
    snapshot = bl.load_backlog(repo)
    assert [t.status for t in snapshot.tasks] == ["Done"] * 6
    merges = git(repo, "log", "--merges", "--format=%s", "main").splitlines()
    assert len(merges) == 6
    status = git(repo, "status", "--porcelain")
    assert status == ""  # the person's checkout is clean after all the merges
