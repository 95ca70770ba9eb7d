"""The orchestrator's DiagramCheck: a task branch against the default branch."""

from __future__ import annotations

from datetime import UTC, datetime

from dcrepo import ARCH, DATA, Repo, mermaid_doc

from scaffold.config import ScaffoldConfig
from scaffold.core.states import EventName
from scaffold.runtime.repo_ops import RepoOps


def _ops(repo: Repo, warnings: list[str]) -> RepoOps:
    return RepoOps(
        repo.root,
        ScaffoldConfig(),
        lambda: datetime(2026, 1, 1, tzinfo=UTC),
        warnings.append,
    )


def test_task_branch_is_blocked_then_synced(repo: Repo) -> None:
    warnings: list[str] = []
    ops = _ops(repo, warnings)
    wt = ops.workspace.create_worktree("TASK-1")
    (wt / "app/pkg/service.py").write_text(
        "from dataclasses import dataclass\n\n\n@dataclass\nclass Job:\n    id: int\n",
        encoding="utf-8",
    )
    (wt / "app/pkg/broken.py").write_text("def x(:\n", encoding="utf-8")
    (wt / "tests").mkdir()
    (wt / "tests/test_service.py").write_text("def test_x() -> None: ...\n", encoding="utf-8")
    ops.workspace.commit_all("TASK-1", "service")
    # Work on the default branch after the task started does not count against it.
    repo.write("app/pkg/mainline.py", "")
    repo.commit("mainline")

    event = ops.check_diagrams("TASK-1")
    assert event.name is EventName.DIAGRAMS_MISSING
    assert len(event.missing) == 3
    arch = next(m for m in event.missing if "pkg.service" in m)
    assert arch.startswith(f"{ARCH} is not updated in this change: add module `pkg.service`")
    assert 'e.g. `pkg_service["pkg.service"]`' in arch
    assert "(app/pkg/service.py:1)" in arch
    data = next(m for m in event.missing if "Job" in m)
    assert "  draft:\n      class Job {\n          +int id\n      }" in data
    assert any("broken.py:1: cannot parse" in w for w in warnings)

    (wt / ARCH).write_text(
        mermaid_doc("flowchart LR\n  pkg.service\n  pkg.broken"), encoding="utf-8"
    )
    (wt / DATA).write_text(
        mermaid_doc("classDiagram\n  class Job {\n    +int id\n  }"), encoding="utf-8"
    )
    ops.workspace.commit_all("TASK-1", "diagrams")
    assert ops.check_diagrams("TASK-1").name is EventName.DIAGRAMS_SYNCED
