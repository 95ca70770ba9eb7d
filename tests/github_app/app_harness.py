"""Running ``scaffold serve`` for real against the GitHub simulator.

The App runs as a child process (the same command a person deploys), configured only
through its environment, and the simulator delivers signed webhooks to it. Scripted
agents stand in for Claude Code through the same agent contract.
"""

from __future__ import annotations

import json
import os
import signal as signals
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

from ghsim import GitHubSimulator
from ghsim.fixture import WEBHOOK_SECRET
from harness import plan, relay_call, requirements, signal_action
from scaffold.demo.scripted import agent_command
from scaffold.demo.scripted import agent_env as scripted_agent_env

PYTHON = sys.executable
T = TypeVar("T")

BACKLOG_CONFIG = (
    'project_name: "widgets"\n'
    'default_status: "To Do"\n'
    'statuses: ["To Do", "In Progress", "Done"]\n'
    "auto_commit: false\n"
    'task_prefix: "task"\n'
)


def signal(payload: Mapping[str, Any]) -> dict[str, Any]:
    return signal_action(payload)


def complete(summary: str) -> dict[str, Any]:
    return signal_action({"signal": "complete", "summary": summary})


def planning_tool(kind: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """ChaosWhisperer's ``requirements`` or PathSeeker's ``tasks``, on the run's endpoint."""
    name = "write-requirements" if kind == "requirements" else "create-tasks"
    return relay_call(name, arguments)


def planned(*tasks: tuple[str, str, list[str]]) -> list[dict[str, Any]]:
    """ChaosWhisperer writes requirements and PathSeeker plans ``tasks``, both at once."""
    titles = [title for _, title, _ in tasks]
    return [
        {
            "role": "chaoswhisperer",
            "actions": [planning_tool("requirements", requirements(*titles)), complete("ok")],
        },
        {
            "role": "pathseeker",
            "actions": [planning_tool("tasks", plan(*tasks)), complete("ok")],
        },
    ]


def asks_then_plans(
    question: str, answer: str, *tasks: tuple[str, str, list[str]]
) -> list[dict[str, Any]]:
    """ChaosWhisperer asks ``question``; resumed with ``answer`` it writes requirements,
    and PathSeeker plans ``tasks``."""
    return [
        {
            "role": "chaoswhisperer",
            "attempt": 1,
            "actions": [
                signal(
                    {
                        "signal": "needs-user-input",
                        "question": question,
                        "context": "The issue does not say.",
                    }
                )
            ],
        },
        {
            "role": "chaoswhisperer",
            "attempt": 2,
            "actions": [
                {"expect_prompt_contains": answer},
                planning_tool("requirements", requirements(*(t for _, t, _ in tasks))),
                complete("requirements written"),
            ],
        },
        {
            "role": "pathseeker",
            "actions": [planning_tool("tasks", plan(*tasks)), complete("tasks planned")],
        },
    ]


def codeweaver(step: str, files: Mapping[str, str], **run: Any) -> dict[str, Any]:
    actions: list[dict[str, Any]] = [{"write": p, "content": c} for p, c in files.items()]
    return {
        "role": "codeweaver",
        "step": step,
        **run,
        "actions": [*actions, complete(f"{step} built")],
    }


VALIDATORS = [
    {"role": "siegemaster", "actions": [complete("edge cases hold")]},
    {"role": "lawbringer", "actions": [complete("Reviewed: small, clear, tested.")]},
]


def repo_files(config: Mapping[str, Any] | None = None) -> dict[str, str]:
    cfg: dict[str, Any] = {
        "slots": 2,
        "trigger_label": "scaffold",
        "agent": {"command": agent_command(), "stuck_timeout_s": 60, "max_attempts": 2},
        "safety": {"max_consecutive_failures": 20},
    }
    cfg.update(config or {})
    return {
        "README.md": "# widgets\n",
        ".gitignore": ".scaffold/\n__pycache__/\n",
        ".github/scaffold.yml": json.dumps(cfg, indent=2) + "\n",
        "backlog/config.yml": BACKLOG_CONFIG,
        "backlog/tasks/.gitkeep": "",
    }


def agent_env(root: Path) -> dict[str, str]:
    """Where the scripted agents find their script and keep their state."""
    return scripted_agent_env(root / "agent-script.json", root / "agent-state")


def writer_repo(sim: GitHubSimulator, files: Mapping[str, str], writer: str = "alice") -> None:
    """``acme/widgets`` with ``files``, the App installed, and one person with write access."""
    sim.add_user(writer)
    sim.create_repo("acme", "widgets", dict(files))
    sim.set_permission("acme/widgets", writer, "write")
    sim.install("acme", ["widgets"])


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def wait_for(what: str, probe: Callable[[], T | None], timeout: float = 90.0) -> T:
    """Poll ``probe`` until it returns something (a deadline for a hung test, not a
    performance assertion)."""
    deadline = time.monotonic() + timeout
    while True:
        value = probe()
        if value is not None and value is not False:
            return value
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.1)


class AppProcess:
    def __init__(self, proc: subprocess.Popen[bytes], port: int, log: Path, state: Path):
        self.proc = proc
        self.port = port
        self.log = log
        self.state = state

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def webhook_url(self) -> str:
        return f"{self.url}/webhook"

    def get(self, path: str) -> str:
        with urllib.request.urlopen(self.url + path, timeout=10) as resp:
            return str(resp.read().decode())

    def log_text(self) -> str:
        return self.log.read_text(encoding="utf-8", errors="replace")

    def log_records(self) -> list[dict[str, Any]]:
        out = []
        for line in self.log_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
        return out

    def stop(self) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(signals.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return int(self.proc.returncode)


@contextmanager
def app_process(
    sim: GitHubSimulator,
    root: Path,
    *,
    extra_env: Mapping[str, str] | None = None,
    state: Path | None = None,
    serve_args: Sequence[str] = (),
) -> Iterator[AppProcess]:
    """``scaffold serve`` on a free port, wired to ``sim`` (webhook included);
    ``serve_args`` are added to its command line."""
    root.mkdir(parents=True, exist_ok=True)
    state = state or root / "state"
    port = free_port()
    log = root / f"serve-{port}.log"
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(root),
        "SCAFFOLD_APP_ID": str(sim.app_id),
        "SCAFFOLD_PRIVATE_KEY": sim.private_key_pem.decode(),
        "SCAFFOLD_WEBHOOK_SECRET": WEBHOOK_SECRET,
        "SCAFFOLD_GITHUB_URL": sim.url,
        "SCAFFOLD_STATUS_INTERVAL_S": "0",
        "SCAFFOLD_RECONCILE_INTERVAL_S": "3600",
        "GIT_CONFIG_NOSYSTEM": "1",
        **agent_env(root),
        **(extra_env or {}),
    }
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [
                PYTHON,
                "-m",
                "scaffold",
                "serve",
                "--port",
                str(port),
                "--state-dir",
                str(state),
                *serve_args,
            ],
            cwd=root,
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    app = AppProcess(proc, port, log, state)
    try:

        def healthy() -> bool | None:
            if proc.poll() is not None:
                raise AssertionError(f"scaffold serve exited {proc.returncode}:\n{app.log_text()}")
            try:
                return "ok" in app.get("/healthz")
            except OSError:
                return None

        wait_for("scaffold serve to listen", healthy, timeout=30)
        sim.set_webhook(app.webhook_url, WEBHOOK_SECRET)
        yield app
    finally:
        app.stop()


def write_script(root: Path, runs: list[dict[str, Any]]) -> None:
    root.mkdir(parents=True, exist_ok=True)
    (root / "agent-script.json").write_text(json.dumps(runs, indent=2), encoding="utf-8")


def forge_of(ctx: Any, status_interval_s: float = 3600) -> Any:
    """The App's forge for one opened repository (``service.open_repo``), in process."""
    from datetime import UTC, datetime

    from scaffold.github.forge import GitHubForge
    from scaffold.runtime.repo_ops import RepoOps

    config = ctx.checkout.config()
    ops = RepoOps(ctx.checkout.path, config, lambda: datetime.now(UTC), print)
    return GitHubForge(
        ctx, ops, config, clock=lambda: datetime.now(UTC), status_interval_s=status_interval_s
    )
