"""One quest on two backends: Codeweaver on the real ``codex`` (the scripted Responses
API), Siegemaster and Lawbringer on the real ``claude`` (the scripted Messages API), all in
scaffold's sandbox. Each run reaches only its own model host and gets only its own key;
the quest's cost is kept per backend."""

from __future__ import annotations

import contextlib
import os
import signal
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
from responses_server import ResponsesServer, When, chain, codex_env, shell, signal_back

from claude.e2e_project import E2EProject
from claude.messages_server import MessagesServer, claude_env
from claude.messages_server import When as ClaudeWhen
from claude.messages_server import chain as claude_chain
from claude.messages_server import signal_back as claude_signal
from harness import isolate_git, require_tool
from scaffold.runtime.session import BACKLOG_QUEST

pytestmark = pytest.mark.interop


@pytest.fixture
def servers() -> Iterator[tuple[ResponsesServer, MessagesServer]]:
    with ResponsesServer() as openai, MessagesServer() as anthropic:
        yield openai, anthropic


@pytest.fixture
def project(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    servers: tuple[ResponsesServer, MessagesServer],
) -> Iterator[E2EProject]:
    openai, anthropic = servers
    proj = E2EProject(tmp_path)
    isolate_git(tmp_path, monkeypatch, also_unset=("CODEX_HOME", "CLAUDE_CONFIG_DIR"))
    env = {
        **claude_env(anthropic.base_url, proj.home),
        **codex_env(openai.base_url, openai.proxy_url),
        "GITHUB_TOKEN": "ghs_planted_github",
    }
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    yield proj
    left = proj.live_agents()
    for pid in left:
        with contextlib.suppress(OSError):
            os.killpg(os.getpgid(pid), signal.SIGKILL)
    assert left == [], f"agent processes outlived the test: {left}"


def test_codeweaver_on_codex_reviewers_on_claude(
    codex_bin: str, servers: tuple[ResponsesServer, MessagesServer], project: E2EProject
) -> None:
    openai, anthropic = servers
    claude_bin = require_tool("claude", "SCAFFOLD_CLAUDE_BIN")
    config = {
        "slots": 1,
        "approval": "auto",
        "agent": {
            "command": [claude_bin],
            "max_attempts": 1,
            "roles": {"codeweaver": {"backend": "codex", "command": [codex_bin]}},
        },
    }
    project.build(config, tasks=["Mixed notes"])
    # From inside Codeweaver's run: the Anthropic host is not reachable, nor any key.
    anthropic_port = urlsplit(anthropic.base_url).port
    probe = (
        "env | grep -c -e ANTHROPIC_API_KEY -e GITHUB_TOKEN -e OPENAI_API_KEY; "
        f"python3 -c \"import socket; socket.create_connection(('127.0.0.1', {anthropic_port}), 5)\""
    )
    openai.add(
        *chain(
            shell(probe),
            shell("mkdir -p notes && echo mixed > notes/mixed.txt"),
            signal_back("complete", summary="notes/mixed.txt written"),
            when=When(role="codeweaver", step="TASK-1"),
            name="codeweaver",
        )
    )
    for role in ("siegemaster", "lawbringer"):
        anthropic.add(
            *claude_chain(
                claude_signal("complete", summary=f"{role}: fine"),
                when=ClaudeWhen(role=role, step="TASK-1"),
                name=role,
            )
        )

    result = project.run()
    openai.check()
    anthropic.check()
    assert result.exit_code == 0, result.output
    quest = project.quest(BACKLOG_QUEST)
    assert quest.tasks["TASK-1"].outcome == "merged"
    assert project.git("show", "main:notes/mixed.txt") == "mixed\n"

    # Each CLI talked to its own API: codex for Codeweaver, claude for the rest.
    assert {r.role for r in openai.requests} == {"codeweaver"}
    assert {r.role for r in anthropic.requests} == {"siegemaster", "lawbringer"}
    [probed] = [r for r in openai.requests if r.turn == "codeweaver.1"]
    output = probed.tool_result.text if probed.tool_result else ""
    assert "Output:\n0\n" in output, output  # no key of any kind in its commands
    assert "ConnectionRefusedError" in output, output  # the other model host is not routed

    # The cost per backend: codex's priced from tokens, claude's as it reports it.
    assert set(quest.cost_by_backend) == {"codex", "claude"}
    assert all(v > 0 for v in quest.cost_by_backend.values())
    assert quest.cost_usd == pytest.approx(sum(quest.cost_by_backend.values()))
    assert set(quest.cost_by_role) == {"codeweaver", "siegemaster", "lawbringer"}
