"""A throwaway repository that scaffold drives with the real ``claude`` CLI.

The end-to-end tests put the scripted Messages API (`messages_server`) behind the real
Claude Code binary and let scaffold's real orchestrator run it: the agent command is the
path to ``claude``, so scaffold adds its Claude Code options (role tools, system prompt,
environment), and the agent inherits scaffold's environment, into which the test puts
``ANTHROPIC_BASE_URL``, the API key and a private ``HOME``.

An `E2EProject` is a git repository with a Backlog.md backlog, an architecture diagram
(DiagramCheck wants it changed when a Python module is added) and a
``.github/scaffold.yml``; it runs scaffold in-process (:meth:`E2EProject.run`, like
``scaffold run`` / ``scaffold quest``) or as the real command line
(:meth:`E2EProject.cli_popen`), and reads what happened from the quest store, the
backlog and git.
"""

from __future__ import annotations

import asyncio
import io
import json
import os
import subprocess
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from harness import RunResult, quest_pids, scaffold_cli, scaffold_popen
from scaffold import backlog as bl
from scaffold.config import load_config
from scaffold.quest.model import HistoryEntry, Quest
from scaffold.runtime import inbox
from scaffold.runtime.session import open_or_create_quest, quest_store, run_quest, state_root
from scaffold.runtime.view import Reporter

PYTHON = sys.executable
GIT_IDENTITY = ("-c", "user.name=Test Person", "-c", "user.email=test@localhost")
ARCHITECTURE = "docs/diagrams/02-architecture.md"
ARCHITECTURE_TEXT = "# Architecture\n\n```mermaid\nflowchart LR\n    main\n```\n"

BACKLOG_CONFIG = (
    'project_name: "claude-e2e"\n'
    'default_status: "To Do"\n'
    'statuses: ["To Do", "In Progress", "Done"]\n'
    "auto_commit: false\n"
    'task_prefix: "task"\n'
)


def scaffold_config(claude_bin: str, **overrides: Any) -> dict[str, Any]:
    """``.github/scaffold.yml`` for the real CLI: local forge, auto approval, no Ward."""
    agent: dict[str, Any] = {"command": [claude_bin], "stuck_timeout_s": 60, "max_attempts": 2}
    agent.update(overrides.pop("agent", {}))
    return {"slots": 2, "agent": agent, "approval": "auto", **overrides}


class E2EProject:
    """One repository under ``root/repo``; scaffold's ``HOME`` is ``root/home`` (the agents
    get private ones in their sandbox)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.repo = root / "repo"
        self.home = root / "home"

    # -- building

    def build(self, config: Mapping[str, Any], tasks: Sequence[str] = ()) -> E2EProject:
        self.home.mkdir(parents=True, exist_ok=True)
        self.repo.mkdir(parents=True)
        self.git("init", "-q", "-b", "main")
        path = self.repo / ".github" / "scaffold.yml"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(dict(config), indent=2) + "\n", encoding="utf-8")
        for sub in ("tasks", "completed", "drafts"):
            (self.repo / "backlog" / sub).mkdir(parents=True)
        (self.repo / "backlog" / "config.yml").write_text(BACKLOG_CONFIG, encoding="utf-8")
        for title in tasks:
            bl.create_task(self.repo, title, description=f"Do: {title}.")
        diagram = self.repo / ARCHITECTURE
        diagram.parent.mkdir(parents=True)
        diagram.write_text(ARCHITECTURE_TEXT, encoding="utf-8")
        (self.repo / "README.md").write_text("# claude e2e\n", encoding="utf-8")
        (self.repo / ".gitignore").write_text(".scaffold/\n__pycache__/\n", encoding="utf-8")
        self.git("add", "-A")
        self.git(*GIT_IDENTITY, "commit", "-q", "-m", "initial")
        return self

    # -- running

    def run(self, *, request: str | None = None) -> RunResult:
        """``scaffold quest <request>`` (with ``request``) or ``scaffold run``, in-process."""
        out = io.StringIO()
        writer = open_or_create_quest(self.repo, None, request=request)
        reporter = Reporter(out, color=False)
        report = asyncio.run(run_quest(self.repo, load_config(self.repo), writer, reporter))
        return RunResult(report, out.getvalue())

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """The real command line, ``python -m scaffold <args>``, in the repository."""
        return scaffold_cli(self.repo, args, os.environ, timeout)

    def cli_popen(self, *args: str) -> subprocess.Popen[str]:
        return scaffold_popen(self.repo, args, os.environ)

    def answer(self, quest_id: str, question_id: str, text: str) -> None:
        """What ``scaffold answer`` does: drop the answer in the inbox."""
        message = inbox.make("answer", quest_id, question_id=question_id, text=text)
        inbox.post(state_root(self.repo), message)

    # -- looking

    def quest(self, quest_id: str) -> Quest:
        return quest_store(self.repo).read(quest_id)

    def history(self, quest_id: str) -> list[HistoryEntry]:
        return list(quest_store(self.repo).history(quest_id))

    def notes(self, quest_id: str, task_id: str | None = None) -> list[str]:
        """The ``agent_result`` notes of a task (of planning with ``task_id`` None)."""
        return [
            str(e.detail.get("note", ""))
            for e in self.history(quest_id)
            if e.kind == "note" and e.event == "agent_result" and e.task_id == task_id
        ]

    def events(self, quest_id: str, task_id: str) -> list[str]:
        return [e.event for e in self.history(quest_id) if e.task_id == task_id and e.event]

    def backlog_status(self, task_id: str) -> str:
        return bl.load_backlog(self.repo).task(task_id).status

    def git(self, *args: str) -> str:
        proc = subprocess.run(
            ["git", *args], cwd=self.repo, capture_output=True, text=True, check=False, timeout=60
        )
        assert proc.returncode == 0, f"git {' '.join(args)}: {proc.stderr}"
        return proc.stdout

    def merge_subjects(self) -> list[str]:
        return self.git("log", "--merges", "--format=%s", "main").splitlines()

    def transcripts(self, session_id: str) -> list[Path]:
        """Claude Code's transcript of a session, kept in the private HOME of the step's
        sandbox (``.scaffold/sandbox/<quest>/<step>/home``) that persists per task."""
        homes = (self.repo / ".scaffold" / "sandbox").glob("*/*/home")
        return [
            p
            for home in homes
            for p in (home / ".claude" / "projects").glob(f"*/{session_id}.jsonl")
        ]

    def live_agents(self, quest_id: str | None = None) -> list[int]:
        return quest_pids(quest_id, self.repo)


def alive(pid: int) -> bool:
    """Whether ``pid`` is a live (not zombie) process."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return stat[stat.rfind(b")") + 2 :][:1] not in (b"Z", b"X")


def wait_until(
    predicate: Callable[[], bool], timeout_s: float = 60, what: str = "condition"
) -> None:
    """Poll ``predicate`` (the deadline only stops a hung test; nothing is timed)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def step_pids(repo: Path, step: str, role: str) -> list[int]:
    """Live processes of one agent run (the agent and its MCP server), by their step
    variables: ``SCAFFOLD_STEP_ID`` and ``SCAFFOLD_ROLE``."""
    wanted = {f"SCAFFOLD_STEP_ID={step}".encode(), f"SCAFFOLD_ROLE={role}".encode()}
    found: list[int] = []
    for pid in quest_pids(None, repo):
        try:
            environ = set(Path(f"/proc/{pid}/environ").read_bytes().split(b"\0"))
        except OSError:
            continue
        if wanted <= environ:
            found.append(pid)
    return found
