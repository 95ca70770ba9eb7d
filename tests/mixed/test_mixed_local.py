"""One local quest on mixed backends: Codeweaver on the real ``codex`` (the scripted
Responses API), Lawbringer on the real ``claude`` (the scripted Messages API), Siegemaster
on the real ``gemini`` (the scripted Gemini API), all in scaffold's sandbox. Each run
reaches only its own model host and gets only its own key; ``scaffold status --json``
keeps the quest's cost per backend and per role.

``SCAFFOLD_RECORD_STATUS=1`` writes that status to ``bench/results/mixed_backend_status.json``.
"""

from __future__ import annotations

import json
import os
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

from claude.e2e_project import E2EProject
from claude.messages_server import When as ClaudeWhen
from claude.messages_server import chain as claude_chain
from claude.messages_server import signal_back as claude_signal
from claude.messages_server import tool as claude_tool
from codex.responses_server import When, chain, shell, signal_back
from gemini.gemini_server import When as GeminiWhen
from gemini.gemini_server import chain as gemini_chain
from gemini.gemini_server import signal_back as gemini_signal
from gemini.gemini_server import tool as gemini_tool
from harness import REPO
from scaffold.runtime.session import BACKLOG_QUEST

pytestmark = pytest.mark.interop

RECORD = REPO / "bench" / "results" / "mixed_backend_status.json"
# The backend of each role of the task.
BACKEND_OF = {"codeweaver": "codex", "siegemaster": "gemini", "lawbringer": "claude"}


def _status(project: E2EProject) -> dict[str, Any]:
    """``scaffold status --json``, the real command line."""
    done = project.cli("status", "--json")
    assert done.returncode == 0, done.stdout + done.stderr
    status: dict[str, Any] = json.loads(done.stdout)
    return status


def test_codeweaver_on_codex_the_validators_on_their_own_backends(
    codex_bin: str,
    claude_bin: str,
    gemini_bin: str,
    servers: ModelServers,
    project: E2EProject,
) -> None:
    config = {
        "slots": 1,
        "approval": "auto",
        "agent": {
            "command": [claude_bin],
            "max_attempts": 1,
            "roles": {
                "codeweaver": {"backend": "codex", "command": [codex_bin]},
                "siegemaster": {"backend": "gemini", "command": [gemini_bin]},
            },
        },
    }
    project.build(config, tasks=["Mixed notes"])
    ports = servers.ports()
    # From inside Codeweaver's run: no key of any kind, only its own model host.
    servers.openai.add(
        *chain(
            shell(probe(KEYS, ports)),
            shell("mkdir -p notes && echo mixed > notes/mixed.txt"),
            signal_back("complete", summary="notes/mixed.txt written"),
            when=When(role="codeweaver", step="TASK-1"),
            name="codeweaver",
        )
    )
    # From inside Lawbringer's: no key but its own, only its own model host.
    foreign = [k for k in KEYS if k != "ANTHROPIC_API_KEY"]
    servers.anthropic.add(
        *claude_chain(
            claude_tool("Bash", {"command": probe(foreign, ports)}),
            claude_signal("complete", summary="lawbringer: fine"),
            when=ClaudeWhen(role="lawbringer", step="TASK-1"),
            name="lawbringer",
        ),
    )
    # From inside Siegemaster's: no key but its own, only its own model host.
    foreign = [k for k in KEYS if k != "GEMINI_API_KEY"]
    servers.google.add(
        *gemini_chain(
            gemini_tool("run_shell_command", {"command": probe(foreign, ports)}),
            gemini_signal("complete", summary="siegemaster: fine"),
            when=GeminiWhen(role="siegemaster", step="TASK-1"),
            name="siegemaster",
        )
    )

    result = project.run()
    servers.check()
    assert result.exit_code == 0, result.output
    assert servers.unused() == []
    quest = project.quest(BACKLOG_QUEST)
    assert quest.tasks["TASK-1"].outcome == "merged"
    assert project.git("show", "main:notes/mixed.txt") == "mixed\n"

    # Each CLI talked to its own API only.
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

    # The cost per backend and per role, on the quest and in `scaffold status --json`:
    # codex's priced from tokens, claude's as it reports it.
    assert set(quest.cost_by_backend) == set(BACKEND_OF.values())
    assert all(v > 0 for v in quest.cost_by_backend.values())
    assert quest.cost_usd == pytest.approx(sum(quest.cost_by_backend.values()))
    assert set(quest.cost_by_role) == set(BACKEND_OF)
    status = _status(project)
    print(json.dumps(status, indent=2))
    [shown] = [q for q in status["quests"] if q["id"] == BACKLOG_QUEST]
    assert shown["cost_by_backend"] == pytest.approx(quest.cost_by_backend)
    assert shown["cost_by_role"] == pytest.approx(quest.cost_by_role)
    assert set(shown["cost_by_backend"]) == set(BACKEND_OF.values())
    assert set(shown["cost_by_role"]) == set(BACKEND_OF)
    assert shown["cost_usd"] == pytest.approx(sum(shown["cost_by_role"].values()))
    if os.environ.get("SCAFFOLD_RECORD_STATUS") == "1":
        # The task's path relative to the repository (the test's is a temporary folder).
        text = json.dumps(status, indent=2).replace(f"{project.repo}/", "")
        RECORD.write_text(text + "\n", encoding="utf-8")
