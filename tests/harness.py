"""Shared test harness: the real external tools, an isolated git, the result of a run."""

from __future__ import annotations

import asyncio
import os
import queue
import shutil
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from scaffold.runtime.report import RunReport
from scaffold.signal_back import mcp_config
from scaffold.signal_back.endpoint import SignalEndpoint
from scaffold.signal_back.records import Binding

REPO = Path(__file__).resolve().parents[1]
TOOLS_BIN = REPO / ".tools" / "node_modules" / ".bin"
PINNED = {
    "backlog": "backlog.md@1.52.0",
    "claude": "@anthropic-ai/claude-code@2.1.197",
    "codex": "@openai/codex@0.169.0",
    "gemini": "@google/gemini-cli@0.61.0",
    "mermaid": "mermaid@11.12.0",
}


def find_tool(name: str, env_var: str) -> str | None:
    """``$env_var`` if set, else ``.tools/node_modules/.bin/<name>``, else ``<name>`` on PATH."""
    explicit = os.environ.get(env_var)
    if explicit:
        return explicit if os.access(explicit, os.X_OK) else None
    candidate = TOOLS_BIN / name
    if candidate.is_file() and os.access(candidate, os.X_OK):
        return str(candidate)
    return shutil.which(name)


def require_tool(name: str, env_var: str) -> str:
    """The tool's path; the test fails (never skips) when it is missing."""
    found = find_tool(name, env_var)
    if found is None:
        pytest.fail(
            f"the {name} CLI is required (looked at ${env_var}, {TOOLS_BIN} and PATH); "
            f"run ./scripts/install --test, or npm install --prefix .tools {PINNED[name]}",
            pytrace=False,
        )
    return found


_GIT_IDENTITY_VARS = (
    "GIT_AUTHOR_NAME",
    "GIT_AUTHOR_EMAIL",
    "GIT_COMMITTER_NAME",
    "GIT_COMMITTER_EMAIL",
    "EMAIL",
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
)


def isolate_git(
    home: Path, monkeypatch: pytest.MonkeyPatch, *, also_unset: tuple[str, ...] = ()
) -> None:
    """No system or user git config and no identity to fall back on.

    ``user.useConfigOnly`` makes git refuse to guess an identity, so scaffold's own
    commits prove they carry their fixed identity.
    """
    config = home / "gitconfig"
    config.write_text("[user]\n\tuseConfigOnly = true\n[init]\n\tdefaultBranch = main\n")
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", str(config))
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    for var in (*_GIT_IDENTITY_VARS, *also_unset):
        monkeypatch.delenv(var, raising=False)


# Who the tests' own commits are by (scaffold brings its own identity).
GIT_IDENTITY = ("-c", "user.name=Test Person", "-c", "user.email=test@localhost")


def git(cwd: Path, *args: str, stdin: str | None = None, check: bool = True) -> str:
    """``git`` in ``cwd``, committing as the test person: its output. A failure fails
    the test with git's own words (``check=False``: the output all the same)."""
    proc = subprocess.run(
        ["git", *GIT_IDENTITY, *args],
        cwd=cwd,
        input=stdin,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout


@dataclass
class RunResult:
    """One ``scaffold run`` done in-process: its report and what it printed."""

    report: RunReport
    output: str

    @property
    def exit_code(self) -> int:
        return self.report.exit_code


def quest_pids(quest_id: str | None, repo: Path) -> list[int]:
    """Live processes started for ``quest_id`` (any quest: None) of ``repo``: agents and
    their MCP servers.

    Found by environment, as scaffold's orphan sweep finds them: ``SCAFFOLD_QUEST_ID`` and
    a ``SCAFFOLD_SIGNAL_DIR`` inside this repository. Zombies do not count.
    """
    marker = f"SCAFFOLD_QUEST_ID={quest_id or ''}".encode()
    prefix = b"SCAFFOLD_SIGNAL_DIR="
    root = str(repo.resolve()).encode() + b"/"
    found: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
            stat = (entry / "stat").read_bytes()
        except OSError:
            continue
        if stat[stat.rfind(b")") + 2 :][:1] in (b"Z", b"X"):
            continue
        quest = any(v == marker if quest_id else v.startswith(marker) for v in environ)
        if quest and any(
            v.startswith(prefix) and v[len(prefix) :].startswith(root) for v in environ
        ):
            found.append(int(entry.name))
    return found


def scaffold_cli(
    repo: Path, args: tuple[str, ...], env: Mapping[str, str], timeout: float = 120
) -> subprocess.CompletedProcess[str]:
    """The real command line to the end: ``python -m scaffold <args>`` in ``repo``."""
    return subprocess.run(
        [sys.executable, "-m", "scaffold", *args],
        cwd=repo,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )


def scaffold_popen(
    repo: Path, args: tuple[str, ...], env: Mapping[str, str]
) -> subprocess.Popen[str]:
    """The real command line in the background, output merged into stdout."""
    return subprocess.Popen(
        [sys.executable, "-m", "scaffold", *args],
        cwd=repo,
        env=dict(env),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def relay_call(name: str, arguments: Mapping[str, Any]) -> dict[str, Any]:
    """An action that calls the run's tool ``name`` on its endpoint (the scripted agent's
    MCP client, as a model's tool call)."""
    if name == "signal-back":
        return signal_action(arguments)
    return {"call": name, "arguments": dict(arguments)}


def signal_action(payload: Mapping[str, Any]) -> dict[str, Any]:
    """The scripted agent's ``signal-back`` call with ``payload`` (it fills ``stepId`` in)."""
    return {"signal": dict(payload)}


# --------------------------------------------------------------------------- planning


def requirements(*contexts: str) -> dict[str, Any]:
    """ChaosWhisperer's requirements: one context per text, each with one observable."""
    return {
        "contexts": [
            {
                "id": f"C{i}",
                "description": text,
                "observables": [{"id": f"C{i}.1", "description": f"{text} is visible"}],
            }
            for i, text in enumerate(contexts, 1)
        ]
    }


def plan(*tasks: tuple[str, str, list[str]]) -> dict[str, Any]:
    """PathSeeker's plan: (key, title, keys it depends on) per task."""
    return {
        "fileMap": ["notes/"],
        "tasks": [
            {
                "key": key,
                "title": title,
                "description": f"{title}.",
                "acceptanceCriteria": [f"{title} works"],
                "dependsOn": deps,
                "priority": "medium",
            }
            for key, title, deps in tasks
        ],
    }


# --------------------------------------------------------------------------- signal-back


@contextmanager
def served_tools(binding: Binding) -> Iterator[dict[str, Any]]:
    """``binding``'s tools served on loopback from a thread of their own, for tests whose
    agent is a subprocess and who have no event loop; yields the ``--mcp-config``."""
    ready: queue.Queue[tuple[dict[str, Any], Callable[[], None]] | BaseException] = queue.Queue()

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        try:
            async with SignalEndpoint(binding) as endpoint:
                config = mcp_config(endpoint.url, endpoint.secret)
                ready.put((config, lambda: loop.call_soon_threadsafe(stop.set)))
                await stop.wait()
        except BaseException as exc:
            ready.put(exc)

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    served = ready.get(timeout=60)
    if isinstance(served, BaseException):
        raise served
    config, stop = served
    try:
        yield config
    finally:
        stop()
        thread.join(timeout=60)


def rewrite_keeping_stat(path: Path, content: str) -> None:
    """Same size, same inode, mtime put back: only ctime shows the change."""
    before = path.stat()
    assert len(content.encode()) == before.st_size
    with open(path, "r+", encoding="utf-8") as fh:
        fh.write(content)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (
        before.st_size,
        before.st_mtime_ns,
        before.st_ino,
    )
