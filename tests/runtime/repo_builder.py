"""Throwaway projects for the runtime integration tests.

A :class:`Project` is a real git repository with a Backlog.md backlog and a
``.github/scaffold.yml`` whose ``agent.command`` runs the scripted agent
(``python -m scaffold.demo.scripted``), plus the agent's script and state dir
beside it. Tests run the real orchestrator in-process (:meth:`Project.run`) or the
real CLI as a subprocess (:meth:`Project.cli`), then look at what happened through
the quest store, the Backlog.md files, git, the scripted agent's
``invocations.jsonl`` and ``/proc``.

Every signal goes through the run's real endpoint: the scripted agent calls
``signal-back`` with the mcp SDK's client (:data:`VALIDATORS` are the filler runs every
task needs, Siegemaster and Lawbringer completing).
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
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from harness import RunResult, git, quest_pids, scaffold_cli, scaffold_popen
from scaffold import backlog as bl
from scaffold.config import load_config
from scaffold.demo.scripted import agent_command
from scaffold.demo.scripted import agent_env as scripted_agent_env
from scaffold.quest.model import HistoryEntry, Quest, TaskRecord, utcnow
from scaffold.runtime.orchestrator import Orchestrator
from scaffold.runtime.session import BACKLOG_QUEST, open_or_create_quest, quest_store, run_quest
from scaffold.runtime.view import Reporter

PYTHON = sys.executable

BACKLOG_CONFIG = (
    'project_name: "runtime-test"\n'
    'default_status: "To Do"\n'
    'statuses: ["To Do", "In Progress", "Done"]\n'
    "auto_commit: false\n"
    'task_prefix: "task"\n'
)


# --------------------------------------------------------------------------- scripts


def complete(summary: str, **extra: Any) -> dict[str, Any]:
    """A ``signal`` action for ``complete`` (the agent fills ``stepId`` in)."""
    return {"signal": {"signal": "complete", "summary": summary, **extra}}


def write(path: str, content: str) -> dict[str, Any]:
    return {"write": path, "content": content}


def codeweaver_done(step: str, **run: Any) -> dict[str, Any]:
    """A Codeweaver run that adds ``notes/<step>.txt`` and signals complete."""
    summary = f"{step} implemented"
    return {
        "role": "codeweaver",
        "step": step,
        **run,
        "actions": [
            write(f"notes/{step.lower()}.txt", f"{step} done\n"),
            complete(summary),
        ],
    }


VALIDATORS: list[dict[str, Any]] = [
    {"role": "siegemaster", "actions": [complete("edge cases hold")]},
    {"role": "lawbringer", "actions": [complete("reviewed: fine")]},
]


# --------------------------------------------------------------------------- the project


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(out.get(key), dict):
            out[key] = _merge(out[key], value)
        else:
            out[key] = value
    return out


def default_config() -> dict[str, Any]:
    return {
        "slots": 2,
        "agent": {"command": agent_command(), "stuck_timeout_s": 60, "max_attempts": 2},
        "approval": "auto",
        # Tests about the consecutive-failure limit set it themselves.
        "safety": {"max_consecutive_failures": 20},
    }


@dataclass(frozen=True)
class TaskSpec:
    title: str
    deps: tuple[str, ...] = ()
    description: str = ""


class Project:
    """One repository, its config and backlog, and the scripted agent's files."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.repo = root / "repo"
        self.script = root / "agent-script.json"
        self.state = root / "agent-state"

    @property
    def agent_env(self) -> dict[str, str]:
        return scripted_agent_env(self.script, self.state)

    # -- building

    def build(
        self,
        tasks: Sequence[str | TaskSpec],
        runs: Sequence[Mapping[str, Any]],
        config: Mapping[str, Any] | None = None,
        *,
        validators: Sequence[Mapping[str, Any]] = VALIDATORS,
    ) -> Project:
        repo = self.repo
        repo.mkdir(parents=True)
        self.git("init", "-q", "-b", "main")
        self.write_config(_merge(default_config(), config or {}))
        for sub in ("tasks", "completed", "drafts"):
            (repo / "backlog" / sub).mkdir(parents=True)
        (repo / "backlog" / "config.yml").write_text(BACKLOG_CONFIG, encoding="utf-8")
        for item in tasks:
            spec = TaskSpec(item) if isinstance(item, str) else item
            bl.create_task(
                repo,
                spec.title,
                description=spec.description or f"Do: {spec.title}.",
                dependencies=spec.deps,
            )
        (repo / "README.md").write_text("# runtime test\n", encoding="utf-8")
        (repo / ".gitignore").write_text(".scaffold/\n__pycache__/\n", encoding="utf-8")
        self.git("add", "-A")
        self.git("commit", "-q", "-m", "initial backlog")
        self.write_script([*runs, *validators])
        return self

    def write_config(self, config: Mapping[str, Any] | str) -> None:
        path = self.repo / ".github" / "scaffold.yml"
        path.parent.mkdir(parents=True, exist_ok=True)
        text = config if isinstance(config, str) else json.dumps(config, indent=2) + "\n"
        path.write_text(text, encoding="utf-8")

    def write_script(self, runs: Sequence[Mapping[str, Any]]) -> None:
        self.script.write_text(json.dumps({"runs": list(runs)}, indent=1), encoding="utf-8")

    # -- running

    def run(
        self, quest_id: str | None = None, *, clock_offset: timedelta | None = None
    ) -> RunResult:
        """One ``scaffold run``, in this process (the scripted agent env must be set).

        ``clock_offset`` runs the orchestrator with its clock that far ahead of now.
        """
        for key, value in self.agent_env.items():
            assert os.environ.get(key) == value, f"{key} is not set for this project"
        out = io.StringIO()
        reporter = Reporter(out, color=False)
        writer = open_or_create_quest(self.repo, quest_id)
        if clock_offset is None:
            report = asyncio.run(run_quest(self.repo, load_config(self.repo), writer, reporter))
        else:
            shift = clock_offset

            def clock() -> datetime:
                return utcnow() + shift

            orchestrator = Orchestrator(
                self.repo, load_config(self.repo), writer, reporter, clock=clock
            )
            try:
                report = asyncio.run(orchestrator.run())
            finally:
                writer.close()
        return RunResult(report, out.getvalue())

    def cli(self, *args: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """The real command line, ``python -m scaffold <args>``, in the repository."""
        return scaffold_cli(self.repo, args, {**os.environ, **self.agent_env}, timeout)

    def cli_popen(self, *args: str) -> subprocess.Popen[str]:
        return scaffold_popen(self.repo, args, {**os.environ, **self.agent_env})

    def status_json(self) -> dict[str, Any]:
        proc = self.cli("status", "--json")
        assert proc.returncode == 0, proc.stderr
        data: dict[str, Any] = json.loads(proc.stdout)
        return data

    # -- looking

    def quest(self, quest_id: str = BACKLOG_QUEST) -> Quest:
        return quest_store(self.repo).read(quest_id)

    def task(self, task_id: str, quest_id: str = BACKLOG_QUEST) -> TaskRecord:
        return self.quest(quest_id).tasks[task_id]

    def history(self, quest_id: str = BACKLOG_QUEST) -> list[HistoryEntry]:
        return list(quest_store(self.repo).history(quest_id))

    def events(self, task_id: str, quest_id: str = BACKLOG_QUEST) -> list[str]:
        return [e.event for e in self.history(quest_id) if e.task_id == task_id and e.event]

    def backlog_task(self, task_id: str) -> bl.BacklogTask:
        return bl.load_backlog(self.repo).task(task_id)

    def invocations(self, step: str | None = None, role: str | None = None) -> list[dict[str, Any]]:
        path = self.state / "invocations.jsonl"
        if not path.exists():
            return []
        rows = [json.loads(x) for x in path.read_text("utf-8").splitlines() if x.strip()]
        return [
            r
            for r in rows
            if (step is None or r["step"] == step) and (role is None or r["role"] == role)
        ]

    def git(self, *args: str) -> str:
        return git(self.repo, *args)

    def merge_subjects(self) -> list[str]:
        return self.git("log", "--merges", "--format=%s", "main").splitlines()

    def merges_of(self, task_number: int) -> int:
        branch = f"scaffold/task-{task_number}:"
        return sum(1 for s in self.merge_subjects() if branch in s.split())

    def scaffold_branches(self) -> list[str]:
        out = self.git("branch", "--list", "--format=%(refname:short)", "scaffold/task-*")
        return out.split()

    def worktrees(self) -> list[str]:
        out = self.git("worktree", "list", "--porcelain")
        return [line.split(" ", 1)[1] for line in out.splitlines() if line.startswith("worktree ")]

    def live_agents(self, quest_id: str = BACKLOG_QUEST) -> list[int]:
        return agent_pids(quest_id, self.repo)


MakeProject = Callable[..., Project]
"""The ``make_project`` fixture: ``make_project(tasks, runs, config=None, *, validators=...)``."""


def agent_pids(quest_id: str, repo: Path) -> list[int]:
    """Live processes of ``quest_id`` started for ``repo`` (an agent, its MCP server, ...).

    Found by environment, as the orchestrator's orphan sweep does: the quest id and a
    ``SCAFFOLD_SIGNAL_DIR`` inside this repository (other repositories on the machine
    have a quest ``backlog`` too).
    """
    return quest_pids(quest_id, repo)


def wait_until(
    predicate: Callable[[], bool], timeout_s: float = 60, what: str = "condition"
) -> None:
    """Poll ``predicate`` (not a timed assertion: the deadline only stops a hung test)."""
    deadline = time.monotonic() + timeout_s
    while not predicate():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)
