"""A scripted agent: a program that honours Claude Code's invocation contract, with no model.

Tests and the demo put ``python -m scaffold.demo.scripted`` in ``agent.command``; the
orchestrator runs it as it runs ``claude`` (``-p <prompt> --output-format stream-json
--verbose --mcp-config <file> [--resume <session>]``). It plays the first run of the
script named by ``SCAFFOLD_AGENT_SCRIPT`` (:mod:`scaffold.demo.script`) whose ``role``,
``step``, ``attempt``, ``prompt_contains`` and ``resumed`` match the invocation;
``attempt`` counts invocations per (step, role) in the state dir (``SCAFFOLD_AGENT_STATE``),
which also logs every invocation to ``invocations.jsonl`` for the tests. ``signal`` and
``call`` actions are real tool calls to the ``scaffold`` MCP server through the mcp SDK.

Exit codes: 0 played to the end; 1 as Claude (bad MCP config, stream-json without
--verbose, unknown session with ``strict_resume``); 2 no run matches; 3 the script
failed (an expectation, a bad action); a ``crash`` action's own code.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import os
import shlex
import shutil
import sys
import time
import uuid
from collections.abc import Mapping
from contextlib import AsyncExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from scaffold.demo.script import (
    Action,
    Append,
    CallTool,
    Crash,
    Delete,
    ExpectPromptContains,
    Hang,
    PrintGarbage,
    PrintLongLine,
    RunCommand,
    Say,
    Script,
    ScriptError,
    SendSignal,
    Sleep,
    Write,
    load_script,
)
from scaffold.demo.stream_json import MCP_SERVER, MCP_TOOL, Stream

if TYPE_CHECKING:
    from mcp import Client

ENV_SCRIPT = "SCAFFOLD_AGENT_SCRIPT"
ENV_STATE = "SCAFFOLD_AGENT_STATE"

EXIT_CLAUDE_ERROR = 1
EXIT_NO_MATCH = 2
EXIT_SCRIPT_FAILED = 3

_MAX_TOOL_OUTPUT = 30_000


# --------------------------------------------------------------------------- command line


def parse_argv(argv: list[str]) -> argparse.Namespace:
    """Claude-like parsing: the prompt after ``-p`` or alone; unknown flags are ignored."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False)
    parser.add_argument("-p", "--print", action="store_true")
    parser.add_argument("--output-format", default="text")
    parser.add_argument("--verbose", action="store_true")
    parser.add_argument("--mcp-config", dest="mcp_configs", action="append", default=[])
    parser.add_argument("--resume", "-r")
    # What scaffold passes a real ``claude`` besides: values to skip, not prompts.
    for flag in ("--allowedTools", "--append-system-prompt", "--model", "--max-turns"):
        parser.add_argument(flag)
    parser.add_argument("prompt", nargs="?")
    return parser.parse_known_args(argv)[0]


def agent_command(python: str = sys.executable) -> list[str]:
    """The ``agent.command`` argv that runs this scripted agent (``-P``: cwd not on sys.path)."""
    return [python, "-P", "-m", "scaffold.demo.scripted"]


def agent_env(script: Path, state: Path) -> dict[str, str]:
    """Where the scripted agent finds its script and keeps its state; they stand in for a
    model's server, outside any sandbox, so the sandbox lets the agent read and write them."""
    return {
        ENV_SCRIPT: str(script),
        ENV_STATE: str(state),
        "SCAFFOLD_SANDBOX_READABLE": str(script),
        "SCAFFOLD_SANDBOX_WRITABLE": str(state),
    }


# --------------------------------------------------------------------------- playing a run


class _Exit(Exception):
    """A ``crash`` action: exit with its code (``args[0]``)."""


@dataclass
class Player:
    """Plays one run's actions in ``cwd``; opens the MCP connection on demand."""

    stream: Stream
    cwd: Path
    prompt: str
    servers: Mapping[str, dict[str, Any]]
    step_id: str
    stack: AsyncExitStack = field(default_factory=AsyncExitStack)
    client: Client | None = None
    connect_error: str | None = None

    async def connect(self) -> str:
        """Connect to the ``scaffold`` server and initialise; return its init status."""
        from scaffold.signal_back.client import connect

        entry = self.servers.get(MCP_SERVER)
        if entry is None or entry.get("type") != "http":
            self.connect_error = f"no HTTP MCP server named {MCP_SERVER!r} configured"
            return "failed"
        try:
            self.client = await self.stack.enter_async_context(connect(entry))
        except Exception as exc:  # any failure to connect is a "failed" server, as in Claude
            self.connect_error = f"MCP server {MCP_SERVER!r} failed to connect: {exc!r}"
            print(f"scripted agent: {self.connect_error}", file=sys.stderr)
            return "failed"
        return "connected"

    async def step(self, action: Action) -> None:
        import anyio

        out = self.stream
        if isinstance(action, Write):
            path = self._inside(action.write)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(action.content, encoding="utf-8")
            args = {"file_path": str(path), "content": action.content}
            out.tool("Write", args, f"File created successfully at: {path}", False)
        elif isinstance(action, Append):
            path = self._inside(action.append)
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "a", encoding="utf-8") as fh:
                fh.write(action.content)
            args = {"file_path": str(path), "old_string": "", "new_string": action.content}
            out.tool("Edit", args, f"The file {path} has been updated.", False)
        elif isinstance(action, Delete):
            path = self._inside(action.delete)
            if path.is_dir() and not path.is_symlink():
                shutil.rmtree(path)
            elif path.exists() or path.is_symlink():
                path.unlink()
            else:
                raise ScriptError(f"delete: {action.delete!r} does not exist")
            out.tool("Bash", {"command": shlex.join(["rm", "-rf", action.delete])}, "", False)
        elif isinstance(action, RunCommand):
            await self._run(action.run)
        elif isinstance(action, Say):
            out.text(action.say)
        elif isinstance(action, Sleep):
            await anyio.sleep(action.sleep)
        elif isinstance(action, PrintGarbage):
            out.raw(action.print_garbage)
        elif isinstance(action, PrintLongLine):
            out.long_line(action.print_long_line)
        elif isinstance(action, Hang):
            await anyio.sleep_forever()
        elif isinstance(action, Crash):
            print(f"scripted agent: crashing with exit code {action.crash}", file=sys.stderr)
            raise _Exit(action.crash)
        elif isinstance(action, SendSignal):
            arguments = dict(action.signal)
            arguments.setdefault("stepId", self.step_id)
            await self._call(MCP_TOOL, arguments)
        elif isinstance(action, CallTool):
            await self._call(action.call, action.arguments)
        elif (
            isinstance(action, ExpectPromptContains)
            and action.expect_prompt_contains not in self.prompt
        ):
            raise ScriptError(
                f"expected the prompt to contain {action.expect_prompt_contains!r}; "
                f"prompt was: {self.prompt!r}"
            )

    def _inside(self, relative: str) -> Path:
        """``relative`` under the cwd; anything that would leave it is a script error."""
        if Path(relative).is_absolute():
            raise ScriptError(f"path {relative!r} must be relative to the working directory")
        root = self.cwd.resolve()
        path = (root / relative).resolve()
        if path == root or not path.is_relative_to(root):
            raise ScriptError(f"path {relative!r} leaves the working directory")
        return path

    async def _run(self, argv: list[str]) -> None:
        import anyio

        # A command can reach the run's endpoint too (the tests' hostile probes try).
        env = {**os.environ, "SCAFFOLD_MCP_SERVERS": json.dumps(self.servers)}
        try:
            done = await anyio.run_process(argv, cwd=self.cwd, check=False, env=env)
        except OSError as exc:
            self.stream.tool("Bash", {"command": shlex.join(argv)}, f"{exc}", True)
            return
        text = (done.stdout + done.stderr).decode("utf-8", "replace")[-_MAX_TOOL_OUTPUT:]
        if done.returncode:
            text = f"Exit code {done.returncode}\n{text}"
        self.stream.tool("Bash", {"command": shlex.join(argv)}, text, done.returncode != 0)

    async def _call(self, tool: str, arguments: dict[str, Any]) -> None:
        from scaffold.signal_back.client import call_tool

        shown = f"mcp__{MCP_SERVER}__{tool}"  # the name the model calls it by
        if self.client is None and self.connect_error is None:
            await self.connect()
        if self.client is None:
            text = f"No such tool available: {shown} ({self.connect_error})"
            self.stream.tool(shown, arguments, text, True)
            return
        try:
            text, is_error = await call_tool(self.client, tool, arguments)
        except Exception as exc:  # a protocol error reaches the model as a tool error
            self.stream.tool(shown, arguments, f"MCP error: {exc}", True)
            return
        self.stream.tool(shown, arguments, text, is_error)


# --------------------------------------------------------------------------- main


def _fail(message: str, code: int) -> int:
    print(f"scripted agent: {message}", file=sys.stderr)
    return code


def main(argv: list[str] | None = None) -> int:
    """Run as the agent; returns the process exit code."""
    import anyio

    try:
        return anyio.run(_main, sys.argv[1:] if argv is None else argv)
    except BrokenPipeError:
        return EXIT_CLAUDE_ERROR


def _log_invocation(
    state: Path, script: Script, session_id: str, resumed: bool, role: str, step: str, prompt: str
) -> tuple[int, int | None] | None:
    """Log the invocation in the state dir; its attempt and the run that matches it, or
    ``None`` when it resumes a session the state dir never saw and the script is strict."""
    state.mkdir(parents=True, exist_ok=True)
    log = state / "invocations.jsonl"
    with open(state / ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # concurrent agents share the state; released on close
        text = log.read_text(encoding="utf-8") if log.exists() else ""
        # A line an agent killed mid-write left torn is not an invocation that counts.
        seen = [e for line in text.splitlines() if (e := _entry(line)) is not None]
        if resumed and script.strict_resume and all(e["session_id"] != session_id for e in seen):
            return None
        attempt = 1 + sum(1 for e in seen if e["step"] == step and e["role"] == role)
        runs = enumerate(script.runs)
        index = next((i for i, r in runs if r.matches(role, step, attempt, prompt, resumed)), None)
        entry = {
            "session_id": session_id,
            "resumed": resumed,
            "role": role,
            "step": step,
            "quest_id": os.environ.get("SCAFFOLD_QUEST_ID", ""),
            "attempt": attempt,
            "run": index,
            "prompt": prompt,
            "cwd": os.getcwd(),
            "pid": os.getpid(),
        }
        with log.open("a", encoding="utf-8") as fh:
            fh.write(("\n" if text and not text.endswith("\n") else "") + json.dumps(entry) + "\n")
    return attempt, index


def _entry(line: str) -> dict[str, Any] | None:
    try:
        entry = json.loads(line)
    except ValueError:
        return None
    return (
        entry
        if isinstance(entry, dict) and {"session_id", "step", "role"} <= entry.keys()
        else None
    )


async def _main(argv: list[str]) -> int:
    started = time.monotonic()
    inv = parse_argv(argv)
    if inv.output_format == "stream-json" and not inv.verbose:
        print(
            "Error: When using --print, --output-format=stream-json requires --verbose",
            file=sys.stderr,
        )
        return EXIT_CLAUDE_ERROR
    prompt = inv.prompt
    if prompt is None:
        prompt = "" if sys.stdin is None or sys.stdin.isatty() else sys.stdin.read()
    servers: dict[str, dict[str, Any]] = {}  # later --mcp-config files win
    for path in inv.mcp_configs:
        try:
            servers.update(json.loads(Path(path).read_text("utf-8"))["mcpServers"])
        except (OSError, ValueError, KeyError, TypeError) as exc:
            print(f"Error: Invalid MCP configuration: {path}: {exc!r}", file=sys.stderr)
            return EXIT_CLAUDE_ERROR
    script_path = os.environ.get(ENV_SCRIPT)
    if not script_path:
        return _fail(f"{ENV_SCRIPT} is not set", EXIT_SCRIPT_FAILED)
    try:
        script = load_script(Path(script_path))
    except ScriptError as exc:
        return _fail(str(exc), EXIT_SCRIPT_FAILED)

    role = os.environ.get("SCAFFOLD_ROLE", "")
    step = os.environ.get("SCAFFOLD_STEP_ID", "")
    resumed = inv.resume is not None
    session_id = inv.resume or str(uuid.uuid4())
    state = Path(os.environ.get(ENV_STATE) or f"{script_path}.state")
    found = _log_invocation(state, script, session_id, resumed, role, step, prompt)
    if found is None:
        print(f"No conversation found with session ID: {session_id}", file=sys.stderr)
        return EXIT_CLAUDE_ERROR
    attempt, index = found

    cwd = Path.cwd()
    stream = Stream(sys.stdout, session_id, inv.output_format)
    run = script.runs[index] if index is not None else None
    actions = run.parsed_actions() if run is not None else []
    player = Player(stream, cwd, prompt, servers, step)
    async with player.stack:
        status = dict.fromkeys(servers, "connected")
        if MCP_SERVER in servers and any(isinstance(a, (SendSignal, CallTool)) for a in actions):
            status[MCP_SERVER] = await player.connect()  # connect up front, as alwaysLoad does
        stream.init(cwd, status)
        if run is None:
            text = f"scripted agent: no run matches role={role!r} step={step!r} attempt={attempt}"
            print(text, file=sys.stderr)
            stream.result(cost=0.0, started=started, is_error=True, text=text)
            return EXIT_NO_MATCH
        try:
            if run.expect_resumed is not None and run.expect_resumed != resumed:
                raise ScriptError(f"expected resumed={run.expect_resumed}, got {resumed}")
            for action in actions:
                await player.step(action)
        except ScriptError as exc:
            return _fail(str(exc), EXIT_SCRIPT_FAILED)
        except _Exit as exc:
            return int(exc.args[0])
        stream.result(cost=run.cost_usd, started=started, is_error=False, text=stream.last_text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
