"""The ``scaffold`` MCP server: the agent's one way to report back (tool ``signal-back``).

This module holds the binding, the payload checks and the durable write that every
transport shares, and the stdio server: bound to one quest, step and role (command-line
options, else ``SCAFFOLD_*`` environment variables), or relaying to the run's endpoint
(``--relay``, ``agent.signal_transport: stdio``). By default scaffold serves the tool
itself over HTTP (:mod:`scaffold.agent.signal_http`). A payload is
checked with :func:`scaffold.signals.parse_signal`; a bad one, a foreign ``stepId``
or a signal the role may not send comes back as a tool error the agent can read
and correct. An accepted signal is on disk (written, fsynced, atomically named
``signal-<seq>.json``) *before* the agent is told to stop, so a signal the agent
saw acknowledged survives a crash of anything afterwards. The orchestrator reads
the files with :func:`read_signals` / :func:`latest_signal`; the last one wins.

The planning roles get one more tool each (see :mod:`scaffold.agent.planning_tools`):
ChaosWhisperer ``write-requirements`` and PathSeeker ``create-tasks``, which needs the
repository root (``--repo-root``). Other roles are neither offered nor served them.
The orchestrator reads what they stored with ``planning_tools.read_requirements`` and
``planning_tools.read_plan``.

The ``mcp`` SDK is imported only where the server is built: the orchestrator imports
this module for :func:`mcp_config` and the readers and should not pay for the SDK.
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import signal
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, ValidationError

from scaffold.agent.planning_tools import (
    TOOL_ROLES,
    PlanningTool,
    claim_durably,
    planning_tools,
)
from scaffold.errors import InvalidIdError, SignalError, UsageError
from scaffold.fsutil import fsync_dir
from scaffold.ids import normalize_task_id
from scaffold.roles import ALLOWED_SIGNALS, Role
from scaffold.signals import (
    SIGNAL_TYPES,
    AnySignal,
    NeedsRoleFollowup,
    Signal,
    parse_signal,
)

if TYPE_CHECKING:
    from mcp.server import Server, ServerRequestContext

SERVER_NAME = "scaffold"
TOOL_NAME = "signal-back"
MODULE = "scaffold.agent.signal_server"

ENV_QUEST_ID = "SCAFFOLD_QUEST_ID"
ENV_STEP_ID = "SCAFFOLD_STEP_ID"
ENV_ROLE = "SCAFFOLD_ROLE"
ENV_SIGNAL_DIR = "SCAFFOLD_SIGNAL_DIR"
ENV_REPO_ROOT = "SCAFFOLD_REPO_ROOT"

_SIGNAL_FILE = re.compile(r"^signal-(\d{1,9})\.json$")
_log = logging.getLogger(__name__)


# --------------------------------------------------------------------------- binding


@dataclass(frozen=True)
class Binding:
    """Who may signal through this server, and where accepted signals go.

    ``repo_root`` is the repository whose backlog ``create-tasks`` writes to; without
    it that tool refuses.
    """

    signal_dir: Path
    step_id: str
    role: Role
    quest_id: str | None = None
    repo_root: Path | None = None


def resolve_binding(argv: list[str] | None, environ: Mapping[str, str]) -> Binding:
    """Build the binding from options, falling back to the environment; options win.

    Raises :class:`UsageError` for unparsable options or a missing/invalid signal dir,
    step id or role.
    """
    try:
        opts = _parser().parse_args(argv)
    except SystemExit as exc:  # argparse has printed its message to stderr
        raise UsageError(f"bad signal-server arguments (argparse exit {exc.code})") from None
    return _binding_from(opts, environ)


def _binding_from(opts: argparse.Namespace, environ: Mapping[str, str]) -> Binding:
    signal_dir = opts.signal_dir or environ.get(ENV_SIGNAL_DIR, "")
    step_id = (opts.step_id or environ.get(ENV_STEP_ID, "")).strip()
    role_name = (opts.role or environ.get(ENV_ROLE, "")).strip().lower()
    quest_id = (opts.quest_id or environ.get(ENV_QUEST_ID, "")).strip() or None
    repo_root = opts.repo_root or environ.get(ENV_REPO_ROOT, "")
    if not signal_dir:
        raise UsageError(f"signal-server needs --signal-dir or {ENV_SIGNAL_DIR}")
    if not step_id:
        raise UsageError(f"signal-server needs --step-id or {ENV_STEP_ID}")
    if not role_name:
        raise UsageError(f"signal-server needs --role or {ENV_ROLE}")
    try:
        role = Role(role_name)
    except ValueError:
        names = ", ".join(r.value for r in Role)
        raise UsageError(f"unknown role {role_name!r}; expected one of {names}") from None
    root = Path(repo_root).absolute() if repo_root else None
    return Binding(Path(signal_dir).absolute(), step_id, role, quest_id, root)


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="scaffold signal-server",
        description="Serve the scaffold MCP server (tool signal-back) over stdio.",
    )
    parser.add_argument(
        "--relay",
        help="forward every tool call to the run's endpoint at this unix socket "
        "(scaffold.agent.signal_relay); the endpoint holds the binding",
    )
    parser.add_argument("--signal-dir", help=f"where accepted signals go (env {ENV_SIGNAL_DIR})")
    parser.add_argument("--step-id", help=f"the caller's step (env {ENV_STEP_ID})")
    parser.add_argument("--role", help=f"the caller's role (env {ENV_ROLE})")
    parser.add_argument("--quest-id", help=f"the caller's quest (env {ENV_QUEST_ID})")
    parser.add_argument(
        "--repo-root",
        help=f"the repository whose backlog create-tasks writes (env {ENV_REPO_ROOT})",
    )
    return parser


def relay_mcp_config(socket_path: Path | str, python: str = sys.executable) -> dict[str, Any]:
    """The ``--mcp-config`` of a run whose tools scaffold answers itself (over ``socket_path``).

    The stdio server it names holds no binding and writes nothing; see
    :mod:`scaffold.agent.signal_relay`. ``-I`` keeps the worktree and ``PYTHON*``
    variables (both the agent's to write) away from the interpreter.
    """
    args = ["-I", "-m", MODULE, f"--relay={socket_path}"]
    entry = {"type": "stdio", "command": python, "args": args, "env": {}, "alwaysLoad": True}
    return {"mcpServers": {SERVER_NAME: entry}}


def mcp_config(
    signal_dir: Path | str,
    step_id: str,
    role: Role | str,
    quest_id: str | None,
    python: str = sys.executable,
    repo_root: Path | str | None = None,
) -> dict[str, Any]:
    """The ``--mcp-config`` JSON an agent gets: one stdio server named ``scaffold``.

    The binding is passed both as options (authoritative) and as environment. The
    server runs as ``python -P -m scaffold.agent.signal_server`` so it needs no CLI
    wiring, and ``-P`` keeps the agent's cwd (the worktree, i.e. repository content)
    off ``sys.path``. ``alwaysLoad`` makes Claude Code wait for the server before the
    first turn, so the tool is never "not available" under load. ``repo_root`` (the
    repository whose backlog PathSeeker's ``create-tasks`` writes to) is passed when given.
    """
    role_name = Role(role).value
    directory = str(Path(signal_dir).absolute())
    # "--opt=value": a value that starts with "-" can never be read as an option
    args = ["-P", "-m", MODULE, f"--signal-dir={directory}", f"--step-id={step_id}"]
    args.append(f"--role={role_name}")
    env = {ENV_SIGNAL_DIR: directory, ENV_STEP_ID: step_id, ENV_ROLE: role_name}
    if quest_id:
        args.append(f"--quest-id={quest_id}")
        env[ENV_QUEST_ID] = quest_id
    if repo_root is not None:
        root = str(Path(repo_root).absolute())
        args.append(f"--repo-root={root}")
        env[ENV_REPO_ROOT] = root
    entry = {"type": "stdio", "command": python, "args": args, "env": env, "alwaysLoad": True}
    return {"mcpServers": {SERVER_NAME: entry}}


# --------------------------------------------------------------------------- records


class SignalRecord(BaseModel):
    """One accepted signal as stored in ``signal-<seq>.json``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    quest_id: str | None
    step_id: str
    role: Role
    received_at: datetime
    seq: int
    signal: Signal


@dataclass(frozen=True)
class CorruptSignalFile:
    """A file in the signal dir that could not be read as a :class:`SignalRecord`."""

    path: Path
    reason: str


def scan_signals(signal_dir: Path | str) -> tuple[list[SignalRecord], list[CorruptSignalFile]]:
    """Every readable record in ``seq`` order, and every file that is not one.

    A missing directory is an empty result: the agent never signalled.
    """
    directory = Path(signal_dir)
    try:
        names = sorted(os.listdir(directory))
    except FileNotFoundError:
        return [], []
    found: list[tuple[int, Path]] = []
    for name in names:
        m = _SIGNAL_FILE.match(name)
        if m:
            found.append((int(m.group(1)), directory / name))
    found.sort()
    records: list[SignalRecord] = []
    corrupt: list[CorruptSignalFile] = []
    for seq, path in found:
        try:
            record = SignalRecord.model_validate_json(path.read_bytes())
        except OSError as exc:
            corrupt.append(CorruptSignalFile(path, f"unreadable: {exc.strerror or exc}"))
            continue
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"]) or "file"
            corrupt.append(CorruptSignalFile(path, f"not a signal record: {where}: {err['msg']}"))
            continue
        if record.seq != seq:
            corrupt.append(CorruptSignalFile(path, f"seq {record.seq} does not match file name"))
            continue
        records.append(record)
    return records, corrupt


def _log_corrupt(problem: CorruptSignalFile) -> None:
    _log.warning("skipping corrupt signal file %s: %s", problem.path, problem.reason)


def read_signals(
    signal_dir: Path | str,
    on_corrupt: Callable[[CorruptSignalFile], None] | None = None,
) -> list[SignalRecord]:
    """Accepted signals in the order they arrived; corrupt files are reported, then skipped.

    ``on_corrupt`` receives each bad file (default: a logged warning).
    """
    records, corrupt = scan_signals(signal_dir)
    report = on_corrupt or _log_corrupt
    for problem in corrupt:
        report(problem)
    return records


def latest_signal(
    signal_dir: Path | str,
    on_corrupt: Callable[[CorruptSignalFile], None] | None = None,
) -> SignalRecord | None:
    """The signal that counts: the last accepted one, or ``None``."""
    records = read_signals(signal_dir, on_corrupt)
    return records[-1] if records else None


class SignalWriter:
    """Stores accepted signals durably, numbering them 1, 2, 3... in arrival order."""

    def __init__(self, binding: Binding) -> None:
        self.binding = binding
        self._lock = threading.Lock()

    def write(self, signal: AnySignal) -> SignalRecord:
        """Write one record; return only once the file and its name are on disk."""
        directory = self.binding.signal_dir
        with self._lock:
            if not directory.is_dir():
                directory.mkdir(parents=True, exist_ok=True)
                fsync_dir(directory.parent)  # the new directory's own name must survive too
            seq = _next_seq(directory)
            while True:
                record = SignalRecord(
                    quest_id=self.binding.quest_id,
                    step_id=self.binding.step_id,
                    role=self.binding.role,
                    received_at=datetime.now(UTC),
                    seq=seq,
                    signal=signal,
                )
                if claim_durably(
                    directory, f"signal-{seq}.json", record.model_dump_json().encode()
                ):
                    return record
                seq += 1  # another writer took this number; never overwrite a signal


def _next_seq(directory: Path) -> int:
    seqs = [int(m.group(1)) for n in os.listdir(directory) if (m := _SIGNAL_FILE.match(n))]
    return max(seqs, default=0) + 1


# --------------------------------------------------------------------------- the tool


_FIELD_HELP = {
    "summary": "complete: what was accomplished.",
    "progress": "partially-complete: what was done so far.",
    "continuationPoint": "partially-complete: exactly where the next session should pick up.",
    "question": "needs-user-input: the question only a person can answer.",
    "context": "needs-user-input / needs-role-followup: what the reader needs to know.",
    "reason": "needs-role-followup: why the other role must act first.",
    "resume": "needs-role-followup: true = resume this session after the target role is done.",
}
_TARGET_ROLES = ["pathseeker", "codeweaver", "siegemaster", "lawbringer", "spiritmender"]


def tool_input_schema(binding: Binding) -> dict[str, Any]:
    """A flat object schema (the Messages API refuses a top-level ``oneOf``).

    Which fields each signal needs is stated in the descriptions and enforced by
    :func:`parse_signal`, whose refusal names the field.
    """
    allowed = [s for s in SIGNAL_TYPES if s in ALLOWED_SIGNALS[binding.role]]
    props: dict[str, Any] = {
        "signal": {"type": "string", "enum": allowed, "description": "Which signal this is."},
        "stepId": {
            "type": "string",
            "description": f"The step you are working on: {binding.step_id!r}.",
        },
    }
    for name, text in _FIELD_HELP.items():
        props[name] = {"type": "boolean" if name == "resume" else "string", "description": text}
    props["targetRole"] = {
        "type": "string",
        "enum": _TARGET_ROLES,
        "description": "needs-role-followup: the role that must act next.",
    }
    return {
        "type": "object",
        "properties": props,
        "required": ["signal", "stepId"],
        "additionalProperties": False,
    }


def tool_description(binding: Binding) -> str:
    allowed = [s for s in SIGNAL_TYPES if s in ALLOWED_SIGNALS[binding.role]]
    needs = {
        "complete": "summary",
        "partially-complete": "progress, continuationPoint",
        "needs-user-input": "question, context",
        "needs-role-followup": "targetRole, reason, context, resume",
    }
    lines = [
        f"Report the outcome of step {binding.step_id!r} to the scaffold orchestrator, "
        "then stop working. Call it exactly once when you are done or blocked.",
        f"As {binding.role.display} you may send: {', '.join(allowed)}.",
    ]
    lines += [f"- {s}: stepId, {needs[s]}" for s in allowed]
    return "\n".join(lines)


def _same_step(sent: str, bound: str) -> bool:
    if sent == bound:
        return True
    try:
        return normalize_task_id(sent) == normalize_task_id(bound)
    except InvalidIdError:
        return False


def _acknowledgement(sig: AnySignal) -> str:
    head = f"signal received: {sig.signal}. Stop working now"
    if sig.signal == "complete":
        return head + "."
    if sig.signal == "partially-complete":
        return head + "; a new session continues from your continuation point."
    if sig.signal == "needs-user-input":
        return head + "; this session resumes with the person's answer."
    assert isinstance(sig, NeedsRoleFollowup)
    after = "; this session resumes afterwards." if sig.resume else "."
    return head + f"; {sig.target.display} acts next{after}"


@dataclass(frozen=True)
class ToolOutcome:
    """What the tool answers: text for the agent, and whether it is an error."""

    text: str
    is_error: bool
    record: SignalRecord | None = None


def handle_signal(writer: SignalWriter, arguments: Mapping[str, Any] | None) -> ToolOutcome:
    """Check one ``signal-back`` call and store it if it is acceptable (no MCP types here)."""
    binding = writer.binding
    retry = "Fix it and call signal-back again."
    try:
        sig = parse_signal(dict(arguments or {}), role=binding.role)
    except SignalError as exc:
        return ToolOutcome(f"signal refused: {exc}. {retry}", True)
    if not _same_step(sig.stepId, binding.step_id):
        text = (
            f"signal refused: stepId: {sig.stepId!r} is not your step; you are working on "
            f"{binding.step_id!r}. Call signal-back again with stepId {binding.step_id!r}."
        )
        return ToolOutcome(text, True)
    try:
        record = writer.write(sig)
    except OSError as exc:
        _log.error("could not store signal in %s: %s", binding.signal_dir, exc)
        text = (
            f"signal NOT recorded (storage error: {exc.strerror or exc}). Call signal-back again."
        )
        return ToolOutcome(text, True)
    _log.info("accepted signal %s #%d for %s", sig.signal, record.seq, binding.step_id)
    return ToolOutcome(_acknowledgement(sig), False, record)


def handle_call(
    binding: Binding,
    writer: SignalWriter,
    planning: Mapping[str, PlanningTool],
    name: str,
    arguments: Mapping[str, Any] | None,
) -> ToolOutcome:
    """Route one tool call: ``signal-back``, the role's planning tool, or a refusal."""
    if name == TOOL_NAME:
        return handle_signal(writer, arguments)
    tool = planning.get(name)
    if tool is not None:
        reply = tool.handle(arguments)
        if not reply.is_error:
            _log.info("accepted %s for %s", name, binding.step_id)
        return ToolOutcome(reply.text, reply.is_error)
    owner = TOOL_ROLES.get(name)
    if owner is not None:
        text = (
            f"tool {name!r} is only for {owner.display}; you are {binding.role.display}. "
            f"Nothing was done. Report with {TOOL_NAME}."
        )
        return ToolOutcome(text, True)
    if not planning:
        return ToolOutcome(f"unknown tool {name!r}; the only tool is {TOOL_NAME}", True)
    names = ", ".join([TOOL_NAME, *planning])
    return ToolOutcome(f"unknown tool {name!r}; your tools are {names}", True)


def build_server(binding: Binding) -> Server[Any]:
    """The low-level MCP server with ``signal-back`` and the role's planning tools.

    Handlers close over ``binding``.
    """
    from mcp import types
    from mcp.server import Server

    writer = SignalWriter(binding)
    planning = {
        t.name: t
        for t in planning_tools(
            binding.role, binding.signal_dir, binding.repo_root, binding.quest_id
        )
    }
    tools = [
        types.Tool(
            name=TOOL_NAME,
            description=tool_description(binding),
            input_schema=tool_input_schema(binding),
        )
    ]
    tools += [
        types.Tool(name=t.name, description=t.description, input_schema=t.input_schema)
        for t in planning.values()
    ]

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        outcome = handle_call(binding, writer, planning, params.name, params.arguments)
        content = [types.TextContent(type="text", text=outcome.text)]
        return types.CallToolResult(content=content, is_error=outcome.is_error)

    return Server(SERVER_NAME, version=_version(), on_list_tools=list_tools, on_call_tool=call_tool)


def _version() -> str:
    from scaffold import __version__

    return __version__


def build_relay_server(socket_path: str) -> Server[Any]:
    """An MCP server whose tools are those of the endpoint at ``socket_path``."""
    import anyio
    from mcp import types
    from mcp.server import Server

    from scaffold.agent.signal_relay import relay_request

    async def ask(request: dict[str, Any]) -> dict[str, Any]:
        return await anyio.to_thread.run_sync(relay_request, socket_path, request)

    async def list_tools(
        ctx: ServerRequestContext[Any], params: types.PaginatedRequestParams | None
    ) -> types.ListToolsResult:
        reply = await ask({"op": "list"})
        tools = [
            types.Tool(name=t["name"], description=t["description"], input_schema=t["inputSchema"])
            for t in reply.get("tools", [])
        ]
        return types.ListToolsResult(tools=tools)

    async def call_tool(
        ctx: ServerRequestContext[Any], params: types.CallToolRequestParams
    ) -> types.CallToolResult:
        request = {"op": "call", "name": params.name, "arguments": params.arguments}
        try:
            reply = await ask(request)
            text, is_error = str(reply.get("text", "")), bool(reply.get("is_error", True))
        except (OSError, ValueError) as exc:
            text = f"signal NOT recorded (scaffold unreachable: {exc}). Call {TOOL_NAME} again."
            is_error = True
        content = [types.TextContent(type="text", text=text)]
        return types.CallToolResult(content=content, is_error=is_error)

    return Server(SERVER_NAME, version=_version(), on_list_tools=list_tools, on_call_tool=call_tool)


async def serve_relay(socket_path: str) -> None:
    from mcp.server.stdio import stdio_server

    server = build_relay_server(socket_path)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


async def serve(binding: Binding) -> None:
    """Serve one agent over this process's stdin/stdout until it closes them."""
    from mcp.server.stdio import stdio_server

    server = build_server(binding)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def main(argv: list[str] | None = None) -> int:
    """Entry point of ``scaffold signal-server`` and ``python -m scaffold.agent.signal_server``.

    Logs go to stderr: stdout carries the MCP protocol.
    """
    import anyio

    try:
        opts = _parser().parse_args(argv)
    except SystemExit as exc:  # --help, or a usage error argparse has reported
        return exc.code if isinstance(exc.code, int) else 2
    if opts.relay:
        signal.signal(signal.SIGINT, signal.SIG_DFL)
        try:
            anyio.run(serve_relay, opts.relay)
        except KeyboardInterrupt:
            return 130
        return 0
    try:
        binding = _binding_from(opts, os.environ)
    except UsageError as exc:
        print(f"scaffold signal-server: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(
        stream=sys.stderr, level=logging.INFO, format="scaffold signal-server: %(message)s"
    )
    # Claude Code stops its MCP servers with SIGINT. asyncio's handler only cancels the
    # main task while anyio's stdin reader thread sits in readline, so the server would
    # linger until SIGTERM. Every accepted signal is on disk before the tool answers, so
    # dying at once on SIGINT loses nothing.
    signal.signal(signal.SIGINT, signal.SIG_DFL)
    try:
        anyio.run(serve, binding)
    except KeyboardInterrupt:
        return 130
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
