"""A scripted Anthropic Messages API on loopback, for driving the real ``claude`` CLI offline.

Why: scaffold's agent is the real Claude Code CLI (DESIGN section 4). To test it without a
network or an account, the CLI is pointed (``ANTHROPIC_BASE_URL``) at this server, which plays
a *script*: a list of `Turn` rules, each matching a request and answering with content blocks
(text, tool calls) streamed as the CLI expects (see notes/claude-code-cli.md), or failing on
purpose (HTTP error, stall, slow stream).

The server runs in a background thread with its own asyncio loop, so synchronous tests and an
in-process orchestrator running its own asyncio loop can both use it::

    script = chain(
        tool("Write", {"file_path": "hello.txt", "content": "hi\\n"}),
        signal_back("complete", summary="wrote hello.txt"),
        final="Done.",
        when=When(role="codeweaver"),
    )
    with MessagesServer(script) as srv:
        env = claude_env(srv.base_url, home)
        ...  # run claude
        assert srv.requests[0].prompt.startswith("Implement")

How a request is recognised (`Request`):

- ``role`` / ``step``: from the description of the ``mcp__scaffold__signal-back`` tool the
  CLI lists in ``tools`` (scaffold's signal server writes "Report the outcome of step 'X'" and
  "As <Role> you may send"), else from scaffold's role prompt ("# You are <Role>", "`stepId`
  set to `X`").
- ``user_text``: the newest user text, skipping ``role: "system"`` entries, tool results and
  the ``<system-reminder>`` blocks the CLI puts before the real prompt.
- ``tool_result``: the last message's tool_result block, with the name of the tool_use it
  answers (found in the conversation itself, so it also works after ``--resume``).

Nothing here is imported by the application; it is test support only.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import math
import os
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import TracebackType
from typing import Any, Self

from aiohttp import web

__all__ = [
    "SIGNAL_TOOL",
    "Block",
    "MessagesServer",
    "Request",
    "Text",
    "ToolInput",
    "ToolResult",
    "ToolUse",
    "Turn",
    "Usage",
    "When",
    "chain",
    "claude_env",
    "error_body",
    "read_events",
    "signal_back",
    "text",
    "tool",
    "write_mcp_config",
]

SIGNAL_TOOL = "mcp__scaffold__signal-back"
DEFAULT_MODEL = "claude-sonnet-4-5-20250929"

JsonObject = dict[str, Any]

# --------------------------------------------------------------------------- environment


def claude_env(
    base_url: str, home: str | os.PathLike[str], extra: Mapping[str, str] | None = None
) -> dict[str, str]:
    """The hermetic environment for one ``claude`` run against ``base_url``.

    Only PATH is taken from the current environment (the Bash tool and git need it); all
    state goes to ``home`` (``~/.claude.json``, session transcripts), which a ``--resume``
    must share with the first run.
    """
    env = {
        "PATH": os.environ.get("PATH", "/usr/local/bin:/usr/bin:/bin"),
        "HOME": os.fspath(home),
        "ANTHROPIC_BASE_URL": base_url,
        "ANTHROPIC_API_KEY": "test",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        "CLAUDE_CODE_MAX_RETRIES": "0",
        "MCP_CONNECTION_NONBLOCKING": "0",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_AUTOUPDATER": "1",
    }
    for name in ("LANG", "LC_ALL", "TMPDIR"):
        if name in os.environ:
            env[name] = os.environ[name]
    if extra:
        env.update(extra)
    return env


# --------------------------------------------------------------------------- requests

_REMINDER = re.compile(r"<system-reminder>.*?</system-reminder>", re.DOTALL)
_TOOL_STEP = re.compile(r"Report the outcome of step '([^']+)'")
_TOOL_ROLE = re.compile(r"As (\w+) you may send")
_PROMPT_ROLE = re.compile(r"^# You are (\w+)", re.MULTILINE)
_PROMPT_STEP = re.compile(r"`stepId` set to `([^`]+)`")


def _blocks(message: Mapping[str, Any]) -> list[JsonObject]:
    content = message.get("content")
    if isinstance(content, str):
        return [{"type": "text", "text": content}]
    if isinstance(content, list):
        return [b for b in content if isinstance(b, dict)]
    return []


def _real_text(block: Mapping[str, Any]) -> str:
    """A text block's text without system reminders ('' for a reminder-only block)."""
    if block.get("type") != "text":
        return ""
    return _REMINDER.sub("", str(block.get("text", ""))).strip()


def _result_text(block: Mapping[str, Any]) -> str:
    content = block.get("content")
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return "\n".join(str(c.get("text", "")) for c in content if isinstance(c, dict))
    return ""


@dataclass(frozen=True)
class ToolResult:
    """The tool_result that ends a request, with the tool_use it answers."""

    tool_use_id: str
    name: str | None
    input: JsonObject | None
    is_error: bool
    text: str


@dataclass(frozen=True)
class Request:
    """One HTTP request the server received, with views a script matches on."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: JsonObject | None
    received_at: float
    turn: str | None = None  # the name of the Turn that answered it, if any

    # -- raw parts ---------------------------------------------------------------------

    @property
    def is_messages(self) -> bool:
        return self.method == "POST" and self.path == "/v1/messages"

    @property
    def session_id(self) -> str | None:
        """The CLI's session id (Claude Code sends it in ``x-claude-code-session-id``)."""
        return self.headers.get("x-claude-code-session-id")

    @property
    def stream(self) -> bool:
        return bool((self.body or {}).get("stream"))

    @property
    def model(self) -> str:
        return str((self.body or {}).get("model") or DEFAULT_MODEL)

    @property
    def system_text(self) -> str:
        system = (self.body or {}).get("system")
        if isinstance(system, str):
            return system
        if isinstance(system, list):
            return "\n".join(str(b.get("text", "")) for b in system if isinstance(b, dict))
        return ""

    @property
    def messages(self) -> list[JsonObject]:
        """The conversation without ``role: "system"`` entries."""
        raw = (self.body or {}).get("messages") or []
        return [m for m in raw if isinstance(m, dict) and m.get("role") in ("user", "assistant")]

    @property
    def tools(self) -> dict[str, JsonObject]:
        raw = (self.body or {}).get("tools") or []
        return {str(t.get("name")): t for t in raw if isinstance(t, dict)}

    # -- views ---------------------------------------------------------------------------

    def user_texts(self) -> list[str]:
        """Every real user text of the conversation, oldest first (reminders skipped)."""
        texts: list[str] = []
        for message in self.messages:
            if message.get("role") != "user":
                continue
            texts += [t for t in (_real_text(b) for b in _blocks(message)) if t]
        return texts

    @property
    def prompt(self) -> str:
        """The first real user text: the ``-p`` prompt that opened the session."""
        texts = self.user_texts()
        return texts[0] if texts else ""

    @property
    def user_text(self) -> str:
        """The newest real user text (the latest ``-p`` prompt)."""
        texts = self.user_texts()
        return texts[-1] if texts else ""

    def tool_uses(self) -> list[JsonObject]:
        """Every tool_use block the assistant sent in this conversation, oldest first."""
        return [
            b
            for m in self.messages
            if m.get("role") == "assistant"
            for b in _blocks(m)
            if b.get("type") == "tool_use"
        ]

    def tool_results(self) -> list[JsonObject]:
        return [
            b
            for m in self.messages
            if m.get("role") == "user"
            for b in _blocks(m)
            if b.get("type") == "tool_result"
        ]

    @property
    def tool_result(self) -> ToolResult | None:
        """The tool_result of the last message, if the request ends with one.

        When the last message answers several tool calls, the last result wins.
        """
        messages = self.messages
        if not messages or messages[-1].get("role") != "user":
            return None
        results = [b for b in _blocks(messages[-1]) if b.get("type") == "tool_result"]
        if not results:
            return None
        last = results[-1]
        use_id = str(last.get("tool_use_id", ""))
        use = next((u for u in reversed(self.tool_uses()) if u.get("id") == use_id), None)
        return ToolResult(
            tool_use_id=use_id,
            name=None if use is None else str(use.get("name")),
            input=None if use is None else use.get("input"),
            is_error=bool(last.get("is_error")),
            text=_result_text(last),
        )

    @property
    def role(self) -> str | None:
        """The scaffold role of the agent (lower case), or None if it is not a scaffold run."""
        described = str(self.tools.get(SIGNAL_TOOL, {}).get("description", ""))
        found = _TOOL_ROLE.search(described) or _PROMPT_ROLE.search(self.prompt)
        return found.group(1).lower() if found else None

    @property
    def step(self) -> str | None:
        """The step id the agent works on, or None if it is not a scaffold run."""
        described = str(self.tools.get(SIGNAL_TOOL, {}).get("description", ""))
        found = _TOOL_STEP.search(described) or _PROMPT_STEP.search(self.prompt)
        return found.group(1) if found else None

    def summary(self) -> str:
        """One line for failure messages."""
        result = self.tool_result
        last = (
            f"tool_result of {result.name}{' (error)' if result.is_error else ''}"
            if result
            else f"user text {self.user_text[:60]!r}"
        )
        return (
            f"{self.method} {self.path} role={self.role} step={self.step} "
            f"messages={len(self.messages)} last={last}"
        )


# --------------------------------------------------------------------------- script DSL

ToolInput = JsonObject | Callable[[Request], JsonObject]


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class ToolUse:
    """A tool call; ``input`` may be computed from the request (e.g. its step id)."""

    name: str
    input: ToolInput = field(default_factory=dict)

    def input_for(self, request: Request) -> JsonObject:
        return self.input(request) if callable(self.input) else dict(self.input)


Block = Text | ToolUse


def text(value: str) -> Text:
    return Text(value)


def tool(name: str, input: ToolInput | None = None) -> ToolUse:
    return ToolUse(name, {} if input is None else input)


def signal_back(signal: str = "complete", step_id: str | None = None, **fields: Any) -> ToolUse:
    """A ``signal-back`` call; ``stepId`` defaults to the step of the request it answers.

    ``fields`` are the signal's other fields by their wire names (``summary``, ``question``,
    ``context``, ``targetRole``, ``continuationPoint``, ...).
    """

    def payload(request: Request) -> JsonObject:
        step = step_id if step_id is not None else request.step
        if step is None:
            raise ScriptError(f"signal_back without step_id, and no step in {request.summary()}")
        return {"signal": signal, "stepId": step, **fields}

    return ToolUse(SIGNAL_TOOL, payload)


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 1200
    output_tokens: int = 80


@dataclass(frozen=True)
class When:
    """What a request must look like for a `Turn` to answer it (every given field must hold).

    - ``role``/``step``: the scaffold role (any case) and step id of the agent.
    - ``text``: a substring of the newest real user text.
    - ``tool_result``: True if the request must end with a tool_result, False if it must not.
    - ``tool``: it ends with the result of a call to this tool (implies ``tool_result``).
    - ``is_error``: that result is (or is not) an error.
    - ``after``: that result answers a tool call made by the `Turn` of this name.
    - ``match``: any other predicate.
    """

    role: str | None = None
    step: str | None = None
    text: str | None = None
    tool_result: bool | None = None
    tool: str | None = None
    is_error: bool | None = None
    after: str | None = None
    match: Callable[[Request], bool] | None = None

    def matches(self, request: Request, emitted: Mapping[str, str]) -> bool:
        if self.role is not None and (request.role or "") != self.role.lower():
            return False
        if self.step is not None and request.step != self.step:
            return False
        if self.text is not None and self.text not in request.user_text:
            return False
        result = request.tool_result
        wants_result = self.tool_result
        if self.tool is not None or self.is_error is not None or self.after is not None:
            wants_result = True
        if wants_result is not None and (result is not None) != wants_result:
            return False
        if result is not None:
            if self.tool is not None and result.name != self.tool:
                return False
            if self.is_error is not None and result.is_error != self.is_error:
                return False
            if self.after is not None and emitted.get(result.tool_use_id) != self.after:
                return False
        return self.match is None or self.match(request)

    def but(self, **changes: Any) -> When:
        """A copy with some fields changed."""
        return dataclasses.replace(self, **changes)


_names = itertools.count(1)


@dataclass
class Turn:
    """One rule of a script: when a request matches, answer it like this.

    Rules are tried in order; the first that matches answers. Each rule counts the requests
    its ``when`` matched (``seen``), whichever rule answered them; ``occurrence=n`` makes it
    answer only the n-th of them, ``times=n`` lets it answer at most n times.

    The answer is ``reply`` streamed as one assistant message (stop_reason ``tool_use`` if it
    calls a tool, else ``end_turn``), unless a failure mode is set:

    - ``http_status``: answer with that status and an Anthropic-style error body.
    - ``stall``: wait that many seconds (``math.inf``: until the server closes) after sending
      ``stall_after`` SSE frames (0: before any byte, not even the status line), then go on.
    - ``delay``: sleep between SSE frames; ``chunk`` splits text and tool input into deltas
      of that many characters (a slow, many-delta stream).

    ``hold_until``: before answering at all, wait until this path exists (a request the test
    holds while it acts, then releases by creating the file); if the server closes first,
    the request gets a 503.
    """

    when: When = field(default_factory=When)
    reply: Sequence[Block] = ()
    name: str = ""
    occurrence: int | None = None
    times: int | None = None
    http_status: int | None = None
    error_message: str = "scripted failure"
    stall: float | None = None
    stall_after: int = 0
    delay: float = 0.0
    chunk: int | None = None
    usage: Usage = field(default_factory=Usage)
    stop_reason: str | None = None
    hold_until: Path | None = None
    seen: int = field(default=0, compare=False)
    fired: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        if not self.name:
            self.name = f"turn-{next(_names)}"
        if self.chunk is not None and self.chunk < 1:
            raise ValueError("chunk must be at least 1")

    @property
    def uses_tool(self) -> bool:
        return any(isinstance(b, ToolUse) for b in self.reply)

    @property
    def final_stop_reason(self) -> str:
        return self.stop_reason or ("tool_use" if self.uses_tool else "end_turn")


def _as_blocks(step: Block | Sequence[Block]) -> list[Block]:
    return [step] if isinstance(step, Text | ToolUse) else list(step)


def chain(
    *steps: Block | Sequence[Block],
    final: str | None = "Done.",
    when: When | None = None,
    name: str | None = None,
    **options: Any,
) -> list[Turn]:
    """Turns for the common pattern: a prompt, then one step per tool result.

    ``steps[0]`` answers a request that does not end with a tool result (the prompt);
    each later step answers the result of the previous step's tool call (error or not);
    ``final`` (an end_turn text) answers the result of the last step. Every turn also
    requires ``when`` (e.g. the role and step). A step without a tool call ends the turn,
    so the steps after it are unreachable: put text in the same step as a tool call.
    ``options`` go to every `Turn` (``times``, ``delay``, ``chunk``, ``usage`` ...).
    """
    base = when or When()
    prefix = name or f"chain-{next(_names)}"
    turns: list[Turn] = []
    previous: str | None = None
    all_steps = [_as_blocks(s) for s in steps]
    if final is not None:
        all_steps.append([Text(final)])
    for index, blocks in enumerate(all_steps):
        rule = base.but(tool_result=False) if previous is None else base.but(after=previous)
        turn = Turn(when=rule, reply=blocks, name=f"{prefix}.{index}", **options)
        turns.append(turn)
        previous = turn.name
    return turns


class ScriptError(Exception):
    """The script cannot answer a request (reported to the test, answered with HTTP 500)."""


def error_body(status: int, message: str) -> JsonObject:
    kinds = {
        400: "invalid_request_error",
        401: "authentication_error",
        403: "permission_error",
        404: "not_found_error",
        413: "request_too_large",
        429: "rate_limit_error",
        500: "api_error",
        529: "overloaded_error",
    }
    kind = kinds.get(status, "api_error")
    return {"type": "error", "error": {"type": kind, "message": message}}


# --------------------------------------------------------------------------- wire format


def _sse(event: JsonObject) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


def _pieces(value: str, chunk: int | None) -> list[str]:
    if not chunk or len(value) <= chunk:
        return [value]
    return [value[i : i + chunk] for i in range(0, len(value), chunk)]


@dataclass(frozen=True)
class _Answer:
    """The blocks of one assistant message, resolved for one request."""

    message_id: str
    model: str
    content: list[JsonObject]
    stop_reason: str
    usage: Usage

    def message(self) -> JsonObject:
        return {
            "id": self.message_id,
            "type": "message",
            "role": "assistant",
            "model": self.model,
            "content": self.content,
            "stop_reason": self.stop_reason,
            "stop_sequence": None,
            "usage": {
                "input_tokens": self.usage.input_tokens,
                "output_tokens": self.usage.output_tokens,
            },
        }

    def frames(self, chunk: int | None) -> list[bytes]:
        start = self.message() | {"content": [], "stop_reason": None}
        start["usage"] = {"input_tokens": self.usage.input_tokens, "output_tokens": 1}
        frames = [_sse({"type": "message_start", "message": start})]
        for index, block in enumerate(self.content):
            if block["type"] == "text":
                opening: JsonObject = {"type": "text", "text": ""}
                deltas = [{"type": "text_delta", "text": p} for p in _pieces(block["text"], chunk)]
            else:
                opening = {"type": "tool_use", "id": block["id"], "name": block["name"]}
                opening["input"] = {}
                raw = json.dumps(block["input"])
                deltas = [
                    {"type": "input_json_delta", "partial_json": p} for p in _pieces(raw, chunk)
                ]
            frames.append(
                _sse({"type": "content_block_start", "index": index, "content_block": opening})
            )
            frames += [
                _sse({"type": "content_block_delta", "index": index, "delta": d}) for d in deltas
            ]
            frames.append(_sse({"type": "content_block_stop", "index": index}))
        frames.append(
            _sse(
                {
                    "type": "message_delta",
                    "delta": {"stop_reason": self.stop_reason, "stop_sequence": None},
                    "usage": {"output_tokens": self.usage.output_tokens},
                }
            )
        )
        frames.append(_sse({"type": "message_stop"}))
        return frames


# --------------------------------------------------------------------------- server


class MessagesServer:
    """The scripted Messages API, on 127.0.0.1 at a random port, in its own thread.

    ``requests`` holds every ``POST /v1/messages`` as a `Request`; ``other_requests`` the
    rest (``HEAD /``, count_tokens ...). ``problems`` lists requests no turn matched and
    script errors: such a request is answered with HTTP 500 so the CLI stops at once, and
    `check` raises with the list.

    From a coroutine, wait without blocking the caller's loop:
    ``await asyncio.to_thread(srv.wait_for_requests, 2)``. A `Turn` keeps its counters
    (``seen``, ``fired``): give each server its own turns.
    """

    def __init__(self, script: Sequence[Turn] = ()) -> None:
        self.script: list[Turn] = list(script)
        self.problems: list[str] = []
        self._requests: list[Request] = []
        self._others: list[Request] = []
        self._emitted: dict[str, str] = {}  # tool_use id -> name of the Turn that sent it
        self._ids = itertools.count(1)
        self._changed = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closing: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self._port = 0

    # -- lifecycle ---------------------------------------------------------------------

    def __enter__(self) -> Self:
        self.start()
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    def start(self) -> None:
        if self._thread is not None:
            raise RuntimeError("MessagesServer already started")
        ready = threading.Event()
        failure: list[BaseException] = []

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            try:
                loop.run_until_complete(self._serve_start())
            except BaseException as exc:
                failure.append(exc)
                ready.set()
                loop.close()
                return
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self._serve_stop())
                loop.close()

        self._thread = threading.Thread(target=run, name="messages-server", daemon=True)
        self._thread.start()
        ready.wait(30)
        if failure:
            raise RuntimeError("MessagesServer failed to start") from failure[0]
        if not self._port:
            raise RuntimeError("MessagesServer did not start within 30 s")

    def stop(self) -> None:
        loop, thread = self._loop, self._thread
        if loop is None or thread is None:
            return
        if not loop.is_closed():
            loop.call_soon_threadsafe(loop.stop)
        thread.join(30)
        self._thread = None

    async def _serve_start(self) -> None:
        self._closing = asyncio.Event()
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])

    async def _serve_stop(self) -> None:
        assert self._closing is not None
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()

    # -- results -----------------------------------------------------------------------

    @property
    def port(self) -> int:
        return self._port

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def requests(self) -> list[Request]:
        with self._changed:
            return list(self._requests)

    @property
    def other_requests(self) -> list[Request]:
        with self._changed:
            return list(self._others)

    def add(self, *turns: Turn) -> None:
        """Append turns to the script (also while a run is going on)."""
        with self._changed:
            self.script.extend(turns)

    def wait_for_requests(self, count: int, timeout: float = 30.0) -> list[Request]:
        """Block until at least ``count`` message requests arrived; raise on timeout."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self._requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = "\n".join(r.summary() for r in self._requests) or "none"
                    raise TimeoutError(f"{count} requests expected in {timeout} s; got: {seen}")
                self._changed.wait(left)
            return list(self._requests)

    def check(self) -> None:
        """Raise AssertionError if a request found no turn or the script failed."""
        if self.problems:
            raise AssertionError("scripted Messages API:\n" + "\n".join(self.problems))

    def unused(self) -> list[Turn]:
        """Turns that never answered (handy in assertions)."""
        with self._changed:
            return [t for t in self.script if t.fired == 0]

    # -- handling ------------------------------------------------------------------------

    def _choose(self, request: Request) -> Turn | None:
        with self._changed:
            chosen: Turn | None = None
            for turn in self.script:
                if not turn.when.matches(request, self._emitted):
                    continue
                turn.seen += 1
                if chosen is not None:
                    continue
                if turn.occurrence is not None and turn.seen != turn.occurrence:
                    continue
                if turn.times is not None and turn.fired >= turn.times:
                    continue
                turn.fired += 1
                chosen = turn
            return chosen

    def _record(self, request: Request, *, messages: bool) -> None:
        with self._changed:
            (self._requests if messages else self._others).append(request)
            self._changed.notify_all()

    def _problem(self, text: str) -> None:
        with self._changed:
            self.problems.append(text)

    def _resolve(self, turn: Turn, request: Request) -> _Answer:
        content: list[JsonObject] = []
        for block in turn.reply:
            if isinstance(block, Text):
                content.append({"type": "text", "text": block.text})
            else:
                use_id = f"toolu_{next(self._ids):06d}{turn.name.replace('.', '_')}"
                use_id = re.sub(r"[^A-Za-z0-9_-]", "_", use_id)
                with self._changed:
                    self._emitted[use_id] = turn.name
                content.append(
                    {
                        "type": "tool_use",
                        "id": use_id,
                        "name": block.name,
                        "input": block.input_for(request),
                    }
                )
        return _Answer(
            message_id=f"msg_{next(self._ids):06d}",
            model=request.model,
            content=content,
            stop_reason=turn.final_stop_reason,
            usage=turn.usage,
        )

    async def _handle(self, http: web.Request) -> web.StreamResponse:
        raw = await http.read()
        body: JsonObject | None = None
        if raw:
            with contextlib.suppress(ValueError):
                parsed = json.loads(raw)
                body = parsed if isinstance(parsed, dict) else None
        request = Request(
            method=http.method,
            path=http.path,
            query=dict(http.query),
            headers={k.lower(): v for k, v in http.headers.items()},
            body=body,
            received_at=time.time(),
        )
        if http.method == "POST" and http.path == "/v1/messages/count_tokens":
            self._record(request, messages=False)
            return web.json_response({"input_tokens": 1000})
        if not request.is_messages:
            self._record(request, messages=False)
            return web.json_response(error_body(404, f"no route {http.path}"), status=404)
        turn = self._choose(request)
        if turn is None:
            self._record(request, messages=True)
            problem = f"no turn matches: {request.summary()}"
            self._problem(problem)
            return web.json_response(error_body(500, problem), status=500)
        request = dataclasses.replace(request, turn=turn.name)
        self._record(request, messages=True)
        try:
            return await self._play(turn, request, http)
        except ScriptError as exc:
            self._problem(str(exc))
            return web.json_response(error_body(500, str(exc)), status=500)
        except Exception as exc:  # a bug in a script's callable: report it, answer 500
            self._problem(f"{turn.name} failed on {request.summary()}: {exc!r}")
            return web.json_response(error_body(500, repr(exc)), status=500)

    async def _sleep(self, seconds: float) -> bool:
        """Sleep, cut short when the server closes; True if it closed."""
        assert self._closing is not None
        timeout = None if math.isinf(seconds) else seconds
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._closing.wait(), timeout)
        return self._closing.is_set()

    async def _held(self, path: Path) -> bool:
        """Wait until ``path`` exists; True if the server closed first."""
        while not path.exists():
            if await self._sleep(0.05):
                return True
        return False

    async def _play(self, turn: Turn, request: Request, http: web.Request) -> web.StreamResponse:
        if turn.hold_until is not None and await self._held(turn.hold_until):
            return web.Response(status=503)
        if turn.stall is not None and turn.stall_after == 0 and await self._sleep(turn.stall):
            return web.Response(status=503)
        if turn.http_status is not None:
            return web.json_response(
                error_body(turn.http_status, turn.error_message),
                status=turn.http_status,
                headers={"request-id": f"req_{next(self._ids):06d}"},
            )
        answer = self._resolve(turn, request)
        if not request.stream:
            return web.json_response(answer.message())
        response = web.StreamResponse(
            status=200,
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "request-id": f"req_{next(self._ids):06d}",
            },
        )
        await response.prepare(http)
        for index, frame in enumerate(answer.frames(turn.chunk)):
            if index and turn.delay and await self._sleep(turn.delay):
                return response
            if (
                turn.stall is not None
                and turn.stall_after
                and index == turn.stall_after
                and await self._sleep(turn.stall)
            ):
                return response
            await response.write(frame)
        await response.write_eof()
        return response


def read_events(stdout: str) -> list[JsonObject]:
    """The JSON objects of a stream-json output (blank and non-JSON lines skipped)."""
    events: list[JsonObject] = []
    for line in stdout.splitlines():
        with contextlib.suppress(ValueError):
            value = json.loads(line)
            if isinstance(value, dict):
                events.append(value)
    return events


def write_mcp_config(path: Path, config: Mapping[str, Any]) -> Path:
    path.write_text(json.dumps(config), encoding="utf-8")
    return path
