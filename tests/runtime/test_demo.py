"""``scaffold demo`` goes through every path it promises and ends with everything Done."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from harness import git
from scaffold import backlog as bl


def test_demo_runs_every_path_to_done(tmp_path: Path) -> None:
    repo = tmp_path / "demo"
    proc = subprocess.run(
        [sys.executable, "-m", "scaffold", "demo", "--dir", str(repo)],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    out = proc.stdout
    assert proc.returncode == 0, out + proc.stderr
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
