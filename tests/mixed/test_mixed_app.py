"""The App with agents on mixed backends: a labelled issue to a merged pull request.

``scaffold serve`` runs as a child process (``app_harness.app_process``) against the
GitHub simulator and runs every agent in its bubblewrap sandbox. Planning is the
scripted agent (Claude Code's contract, no model); the task's roles are real CLIs, each
against its own scripted model API: Codeweaver on ``codex``, Lawbringer on ``claude``,
Siegemaster on ``gemini``. From inside its run, each CLI's shell shows that it has no key
but its own and reaches no model host but its own. The quest keeps its cost per backend and per
role, and the status comment on the issue and the App's ``/metrics`` show it.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
from mixed_setup import (
    KEYS,
    ModelServers,
    keys_seen,
    probe,
    reached,
    tool_output,
)

from claude.messages_server import When as ClaudeWhen
from claude.messages_server import chain as claude_chain
from claude.messages_server import signal_back as claude_signal
from claude.messages_server import tool as claude_tool
from codex.responses_server import When, chain, shell, signal_back
from gemini.gemini_server import When as GeminiWhen
from gemini.gemini_server import chain as gemini_chain
from gemini.gemini_server import signal_back as gemini_signal
from gemini.gemini_server import tool as gemini_tool
from ghsim import GitHubSimulator
from ghsim.fixture import github_sim  # noqa: F401
from harness import quest_pids
from scaffold.demo.scripted import agent_command
from scaffold.runtime.session import quest_store

# The App's test harness lives with the App's tests (tests/github_app).
_GITHUB_APP_TESTS = str(Path(__file__).resolve().parents[1] / "github_app")
if _GITHUB_APP_TESTS not in sys.path:
    sys.path.append(_GITHUB_APP_TESTS)

from app_harness import app_process, planned, repo_files, wait_for, write_script  # noqa: E402

pytestmark = [pytest.mark.interop, pytest.mark.timeout(600)]

REPO = "acme/widgets"
BRANCH = "scaffold/task-1"
NOTES = "notes/mixed.txt"
# The backend of each role that runs on a real CLI; planning is the scripted agent,
# which speaks Claude Code's contract (backend claude).
BACKEND_OF = {"codeweaver": "codex", "siegemaster": "gemini", "lawbringer": "claude"}
# What no agent's shell may see: the model keys, the forge's token, the App's secrets.
SECRETS = (*KEYS, "SCAFFOLD_PRIVATE_KEY", "SCAFFOLD_WEBHOOK_SECRET")
# A deadline for a hung test only: each CLI run takes seconds.
DEADLINE = 240.0


def _pr(sim: GitHubSimulator) -> Any | None:
    return next((p for p in sim.repo(REPO).pulls.values() if p.head == BRANCH), None)


def _status_comment(sim: GitHubSimulator, issue: int, *words: str) -> str | None:
    for c in sim.repo(REPO).comments.values():
        if c.issue_number == issue and "scaffold:status" in c.body:
            return str(c.body) if all(w in c.body for w in words) else None
    return None


def _by_backend(metrics: str) -> dict[str, float]:
    """``scaffold_cost_usd_by_backend`` of ``/metrics``, by backend."""
    found = re.findall(r'^scaffold_cost_usd_by_backend\{backend="(\w+)"\} (\S+)$', metrics, re.M)
    return {name: float(value) for name, value in found}


def test_a_labelled_issue_merges_with_each_role_on_its_own_backend(
    codex_bin: str,
    claude_bin: str,
    gemini_bin: str,
    servers: ModelServers,
    github_sim: GitHubSimulator,  # noqa: F811
    tmp_path: Path,
) -> None:
    sim = github_sim
    root = tmp_path / "app"
    agent = {
        "command": agent_command(),
        "stuck_timeout_s": 60,
        "max_attempts": 1,
        "roles": {
            "codeweaver": {"backend": "codex", "command": [codex_bin]},
            "siegemaster": {"backend": "gemini", "command": [gemini_bin]},
            "lawbringer": {"command": [claude_bin]},
        },
    }
    sim.add_user("alice")
    sim.create_repo("acme", "widgets", repo_files({"agent": agent}))
    sim.set_permission(REPO, "alice", "write")
    sim.protect_branch(
        REPO, "main", required_checks=["scaffold/diagram-check"], required_approvals=1
    )
    sim.install("acme", ["widgets"])
    write_script(root, planned(("notes", "Write the mixed notes", [])))

    ports = servers.ports()
    servers.openai.add(
        *chain(
            shell(probe(SECRETS, ports)),
            shell(f"mkdir -p notes && echo mixed > {NOTES}"),
            signal_back("complete", summary=f"{NOTES} written"),
            when=When(role="codeweaver", step="TASK-1"),
            name="codeweaver",
        )
    )
    foreign = [k for k in SECRETS if k != "ANTHROPIC_API_KEY"]
    servers.anthropic.add(
        *claude_chain(
            claude_tool("Bash", {"command": probe(foreign, ports)}),
            claude_signal("complete", summary="Reviewed: small and clear."),
            when=ClaudeWhen(role="lawbringer", step="TASK-1"),
            name="lawbringer",
        ),
    )
    foreign = [k for k in SECRETS if k != "GEMINI_API_KEY"]
    servers.google.add(
        *gemini_chain(
            gemini_tool("run_shell_command", {"command": probe(foreign, ports)}),
            gemini_signal("complete", summary="edge cases hold"),
            when=GeminiWhen(role="siegemaster", step="TASK-1"),
            name="siegemaster",
        )
    )
    # The App keeps its own HOME and PATH; each agent gets a private HOME in its sandbox.
    env = {k: v for k, v in servers.env(tmp_path / "unused").items() if k not in ("HOME", "PATH")}

    with app_process(sim, root, extra_env=env) as app:
        try:
            issue = sim.open_issue(REPO, "Mixed notes", "Write notes/mixed.txt.", by="alice")
            sim.label_issue(REPO, issue, "scaffold", by="alice")
            pr = wait_for("the PR of task-1", lambda: _pr(sim), timeout=DEADLINE)
            servers.check()
            sim.submit_review(REPO, pr.number, "APPROVED", by="alice")
            wait_for("the PR merged", lambda: sim.repo(REPO).pulls[pr.number].merged, DEADLINE)
            comment = wait_for(
                "the status comment with the cost per backend",
                lambda: _status_comment(
                    sim, issue, "✅ merged", "Spent by agent:", "codex $", "Spent by role:"
                ),
                timeout=DEADLINE,
            )
            metrics = app.get("/metrics")
        finally:
            clone = app.state / "repos" / REPO
            left = quest_pids(None, clone) if clone.exists() else []
            for pid in left:  # a failed test must not leak agents into the next one
                with contextlib.suppress(OSError):
                    os.killpg(os.getpgid(pid), signal.SIGKILL)
        assert left == [], f"agent processes outlived their runs: {left}"

    servers.check()
    assert servers.unused() == []
    assert sim.repo(REPO).file_at("main", NOTES) == b"mixed\n"
    assert 'scaffold_sandbox_repositories{mode="bwrap"} 1.0' in metrics

    # Each CLI talked to its own API only, and from its sandbox reached only that.
    assert {r.role for r in servers.openai.requests} == {"codeweaver"}
    assert {r.role for r in servers.anthropic.requests} == {"lawbringer"}
    assert {r.role for r in servers.google.requests} == {"siegemaster"}
    probes = {
        "codex": servers.openai.requests,
        "claude": servers.anthropic.requests,
        "gemini": servers.google.requests,
    }
    for backend, requests in probes.items():
        [probed] = [r for r in requests if str(r.turn).endswith(".1")]
        output = tool_output(probed.tool_result)
        assert keys_seen(output) == 0, output
        only = {b: "connected" if b == backend else "refused" for b in probes}
        assert reached(output) == only, output

    # The quest's cost per backend and per role, on the issue and in /metrics.
    quest = quest_store(app.state / "repos" / REPO).read(f"issue-{issue}")
    assert set(quest.cost_by_backend) == set(BACKEND_OF.values())
    assert set(quest.cost_by_role) == {"chaoswhisperer", "pathseeker", *BACKEND_OF}
    assert quest.cost_usd == pytest.approx(sum(quest.cost_by_backend.values()))
    assert quest.cost_usd == pytest.approx(sum(quest.cost_by_role.values()))
    print(comment)
    for backend, usd in quest.cost_by_backend.items():
        assert f"{backend} ${usd:.2f}" in comment, comment
    assert _by_backend(metrics) == pytest.approx(quest.cost_by_backend), metrics
