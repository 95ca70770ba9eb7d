"""A scripted Gemini API (``streamGenerateContent``) on loopback, for the real ``gemini`` CLI.

The CLI is pointed at it with ``GOOGLE_GEMINI_BASE_URL`` and asks, once per model turn,
``POST /v1beta/models/<model>:streamGenerateContent?alt=sse``. The server plays a script
of `Turn` rules, as the Claude tests' ``messages_server`` does: the first rule whose
`When` matches a request answers it, as SSE frames of ``candidates`` (text parts, a
``functionCall`` part) with ``usageMetadata``, or fails on purpose (an HTTP error, a
stall).

How a request is recognised (`Request`):

- ``role`` / ``step``: from the description of the ``mcp_scaffold_signal-back``
  declaration (scaffold's signal server writes "Report the outcome of step 'X'" and "As
  <Role> you may send"), else from scaffold's prompt ("# You are <Role>").
- ``user_text``: the newest user text part (the CLI's ``<session_context>`` part and its
  "System: ..." notes skipped); ``prompt`` the first one.
- ``tool_result``: the ``functionResponse`` of the last ``contents`` entry, with the
  call it answers (the CLI echoes the model's calls back in the history).

The CLI stops calling a tool the fifth time in a row it is asked with the same
arguments (loop detection): scripts never repeat a call that often. Any request that is
not a ``streamGenerateContent`` call is a problem (`check` fails the test).
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
from types import TracebackType
from typing import Any, Self

from aiohttp import web

SIGNAL_TOOL = "mcp_scaffold_signal-back"
REQUIREMENTS_TOOL = "mcp_scaffold_write-requirements"
TASKS_TOOL = "mcp_scaffold_create-tasks"

JsonObject = dict[str, Any]

_PATH = re.compile(r"^/v1beta/models/([^/:]+):streamGenerateContent$")
_TOOL_STEP = re.compile(r"Report the outcome of step '([^']+)'")
_TOOL_ROLE = re.compile(r"As (\w+) you may send")
_PROMPT_ROLE = re.compile(r"^# You are (\w+)", re.MULTILINE)


def gemini_env(base_url: str, home: str | os.PathLike[str]) -> dict[str, str]:
    """Scaffold's environment for Gemini runs against ``base_url`` (the agent's own
    settings are scaffold's business: it writes them into the step's private folder)."""
    return {
        "HOME": os.fspath(home),
        "GOOGLE_GEMINI_BASE_URL": base_url,
        "GEMINI_API_KEY": "test-gemini-key",
    }


# --------------------------------------------------------------------------- requests


def _parts(entry: Mapping[str, Any]) -> list[JsonObject]:
    parts = entry.get("parts")
    return [p for p in parts if isinstance(p, dict)] if isinstance(parts, list) else []


def _real_text(part: Mapping[str, Any]) -> str:
    text = part.get("text")
    if not isinstance(text, str) or text.startswith("<session_context>"):
        return ""
    if text.startswith("System: "):  # the CLI's own notes (a loop detected ...)
        return ""
    return text.strip()


def call_key(name: str, args: Mapping[str, Any]) -> str:
    return name + json.dumps(args, sort_keys=True)


@dataclass(frozen=True)
class ToolResult:
    """The functionResponse that ends a request, with the call it answers."""

    name: str
    call_id: str | None
    args: JsonObject | None
    output: str
    is_error: bool


@dataclass(frozen=True)
class Request:
    """One HTTP request the server received, with views a script matches on."""

    method: str
    path: str
    query: dict[str, str]
    headers: dict[str, str]
    body: JsonObject | None
    received_at: float
    turn: str | None = None

    @property
    def model(self) -> str | None:
        found = _PATH.match(self.path)
        return found.group(1) if found else None

    @property
    def contents(self) -> list[JsonObject]:
        raw = (self.body or {}).get("contents") or []
        return [c for c in raw if isinstance(c, dict)]

    @property
    def tools(self) -> dict[str, JsonObject]:
        found: dict[str, JsonObject] = {}
        for group in (self.body or {}).get("tools") or []:
            for decl in group.get("functionDeclarations") or [] if isinstance(group, dict) else []:
                if isinstance(decl, dict):
                    found[str(decl.get("name"))] = decl
        return found

    @property
    def system_text(self) -> str:
        system = (self.body or {}).get("systemInstruction")
        if not isinstance(system, dict):
            return ""
        return "\n".join(str(p.get("text", "")) for p in _parts(system))

    def user_texts(self) -> list[str]:
        return [
            t
            for entry in self.contents
            if entry.get("role") == "user"
            for t in (_real_text(p) for p in _parts(entry))
            if t
        ]

    @property
    def prompt(self) -> str:
        texts = self.user_texts()
        return texts[0] if texts else ""

    @property
    def user_text(self) -> str:
        texts = self.user_texts()
        return texts[-1] if texts else ""

    @property
    def session_context(self) -> str:
        for entry in self.contents:
            for part in _parts(entry):
                text = part.get("text")
                if isinstance(text, str) and text.startswith("<session_context>"):
                    return text
        return ""

    def calls(self) -> list[JsonObject]:
        """Every functionCall the model made in this conversation, oldest first."""
        return [
            p["functionCall"]
            for entry in self.contents
            if entry.get("role") == "model"
            for p in _parts(entry)
            if isinstance(p.get("functionCall"), dict)
        ]

    def responses(self) -> list[JsonObject]:
        return [
            p["functionResponse"]
            for entry in self.contents
            if entry.get("role") == "user"
            for p in _parts(entry)
            if isinstance(p.get("functionResponse"), dict)
        ]

    @property
    def tool_result(self) -> ToolResult | None:
        contents = self.contents
        if not contents or contents[-1].get("role") != "user":
            return None
        found = [p["functionResponse"] for p in _parts(contents[-1]) if "functionResponse" in p]
        if not found:
            return None
        last = found[-1]
        call_id = last.get("id")
        call = next((c for c in reversed(self.calls()) if c.get("id") == call_id), None)
        response = last.get("response") if isinstance(last.get("response"), dict) else {}
        error = response.get("error")
        output = response.get("output")
        return ToolResult(
            name=str(last.get("name")),
            call_id=call_id if isinstance(call_id, str) else None,
            args=None if call is None else call.get("args"),
            output=str(output if error is None else error),
            is_error=error is not None,
        )

    @property
    def role(self) -> str | None:
        described = str(self.tools.get(SIGNAL_TOOL, {}).get("description", ""))
        found = _TOOL_ROLE.search(described) or _PROMPT_ROLE.search(self.prompt)
        return found.group(1).lower() if found else None

    @property
    def step(self) -> str | None:
        described = str(self.tools.get(SIGNAL_TOOL, {}).get("description", ""))
        found = _TOOL_STEP.search(described)
        return found.group(1) if found else None

    def summary(self) -> str:
        result = self.tool_result
        last = (
            f"functionResponse of {result.name}{' (error)' if result.is_error else ''}"
            if result
            else f"user text {self.user_text[:60]!r}"
        )
        return (
            f"{self.method} {self.path} role={self.role} step={self.step} "
            f"contents={len(self.contents)} last={last}"
        )


# --------------------------------------------------------------------------- script DSL

Args = JsonObject | Callable[[Request], JsonObject]


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Call:
    """A functionCall; ``args`` may be computed from the request (e.g. its step id)."""

    name: str
    args: Args = field(default_factory=dict)

    def args_for(self, request: Request) -> JsonObject:
        return self.args(request) if callable(self.args) else dict(self.args)


Part = Text | Call


def tool(name: str, args: Args | None = None) -> Call:
    return Call(name, {} if args is None else args)


def signal_back(signal: str = "complete", **fields: Any) -> Call:
    """A ``signal-back`` call for the step of the request it answers."""

    def payload(request: Request) -> JsonObject:
        if request.step is None:
            raise ScriptError(f"signal_back, and no step in {request.summary()}")
        return {"signal": signal, "stepId": request.step, **fields}

    return Call(SIGNAL_TOOL, payload)


@dataclass(frozen=True)
class Usage:
    prompt_tokens: int = 10_000
    output_tokens: int = 200
    cached_tokens: int = 0


@dataclass(frozen=True)
class When:
    """What a request must look like for a `Turn` to answer it (every given field holds).

    ``after``: the request ends with the response to a call the `Turn` of that name made.
    """

    role: str | None = None
    step: str | None = None
    text: str | None = None
    tool_result: bool | None = None
    tool: str | None = None
    after: str | None = None
    match: Callable[[Request], bool] | None = None

    def matches(self, request: Request, emitted: Mapping[str, str]) -> bool:
        if self.role is not None and request.role != self.role:
            return False
        if self.step is not None and request.step != self.step:
            return False
        if self.text is not None and self.text not in request.user_text:
            return False
        result = request.tool_result
        wants = True if (self.tool or self.after) else self.tool_result
        if wants is not None and (result is not None) != wants:
            return False
        if result is not None:
            if self.tool is not None and result.name != self.tool:
                return False
            if self.after is not None:
                key = call_key(result.name, result.args or {})
                if emitted.get(key) != self.after:
                    return False
        return self.match is None or self.match(request)

    def but(self, **changes: Any) -> When:
        return dataclasses.replace(self, **changes)


_names = itertools.count(1)


@dataclass
class Turn:
    """One rule: when a request matches, answer with ``reply`` (text parts, at most one
    call), or fail: ``http_status`` (a Google-style error body), ``stall`` seconds
    before any byte (``math.inf``: until the server closes). ``times`` caps how often it
    answers."""

    when: When = field(default_factory=When)
    reply: Sequence[Part] = ()
    name: str = ""
    times: int | None = None
    http_status: int | None = None
    error_message: str = "scripted failure"
    stall: float | None = None
    usage: Usage = field(default_factory=Usage)
    fired: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        if not self.name:
            self.name = f"turn-{next(_names)}"


def chain(
    *steps: Part | Sequence[Part],
    final: str | None = "Done.",
    when: When | None = None,
    name: str | None = None,
    **options: Any,
) -> list[Turn]:
    """A prompt, then one step per function response; ``final`` text answers the last."""
    base = when or When()
    prefix = name or f"chain-{next(_names)}"
    turns: list[Turn] = []
    previous: str | None = None
    all_steps = [[s] if isinstance(s, Text | Call) else list(s) for s in steps]
    if final is not None:
        all_steps.append([Text(final)])
    for index, parts in enumerate(all_steps):
        rule = base.but(tool_result=False) if previous is None else base.but(after=previous)
        turn = Turn(when=rule, reply=parts, name=f"{prefix}.{index}", **options)
        turns.append(turn)
        previous = turn.name
    return turns


class ScriptError(Exception):
    """The script cannot answer a request (reported to the test, answered with HTTP 500)."""


def error_body(status: int, message: str) -> JsonObject:
    names = {400: "INVALID_ARGUMENT", 429: "RESOURCE_EXHAUSTED", 500: "INTERNAL"}
    return {"error": {"code": status, "message": message, "status": names.get(status, "UNKNOWN")}}


def _frames(parts: list[JsonObject], usage: Usage, model: str | None) -> list[bytes]:
    """One SSE frame per part; the last carries finishReason and usageMetadata."""
    frames: list[bytes] = []
    for index, part in enumerate(parts):
        candidate: JsonObject = {"content": {"role": "model", "parts": [part]}, "index": 0}
        chunk: JsonObject = {"candidates": [candidate], "modelVersion": model}
        if index == len(parts) - 1:
            candidate["finishReason"] = "STOP"
            chunk["usageMetadata"] = {
                "promptTokenCount": usage.prompt_tokens,
                "candidatesTokenCount": usage.output_tokens,
                "totalTokenCount": usage.prompt_tokens + usage.output_tokens,
                "cachedContentTokenCount": usage.cached_tokens,
            }
        frames.append(f"data: {json.dumps(chunk)}\r\n\r\n".encode())
    return frames


# --------------------------------------------------------------------------- server


class GeminiServer:
    """The scripted API on 127.0.0.1 at a random port, in its own thread and loop.

    ``requests`` holds every model request; ``problems`` every request no turn matched,
    every other request (nothing else may be asked), and script errors.
    """

    def __init__(self, script: Sequence[Turn] = ()) -> None:
        self.script: list[Turn] = list(script)
        self.problems: list[str] = []
        self._requests: list[Request] = []
        self._emitted: dict[str, str] = {}  # call_key -> name of the Turn that made it
        self._changed = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closing: asyncio.Event | None = None
        self._runner: web.AppRunner | None = None
        self._port = 0

    def __enter__(self) -> Self:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            loop.run_until_complete(self._serve_start())
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self._serve_stop())
                loop.close()

        self._thread = threading.Thread(target=run, name="gemini-server", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("GeminiServer did not start within 30 s")
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self._loop is not None and self._thread is not None:
            self._loop.call_soon_threadsafe(self._loop.stop)
            self._thread.join(30)

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

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}"

    @property
    def requests(self) -> list[Request]:
        with self._changed:
            return list(self._requests)

    def add(self, *turns: Turn) -> None:
        with self._changed:
            self.script.extend(turns)

    def wait_for_requests(self, count: int, timeout: float = 60.0) -> list[Request]:
        deadline = time.monotonic() + timeout
        with self._changed:
            while len(self._requests) < count:
                left = deadline - time.monotonic()
                if left <= 0:
                    seen = "\n".join(r.summary() for r in self._requests) or "none"
                    raise TimeoutError(f"{count} requests expected; got: {seen}")
                self._changed.wait(left)
            return list(self._requests)

    def check(self) -> None:
        if self.problems:
            raise AssertionError("scripted Gemini API:\n" + "\n".join(self.problems))

    def unused(self) -> list[str]:
        with self._changed:
            return [t.name for t in self.script if t.fired == 0]

    # -- handling

    def _choose(self, request: Request) -> Turn | None:
        with self._changed:
            for turn in self.script:
                if turn.times is not None and turn.fired >= turn.times:
                    continue
                if turn.when.matches(request, self._emitted):
                    turn.fired += 1
                    return turn
            return None

    def _record(self, request: Request) -> None:
        with self._changed:
            self._requests.append(request)
            self._changed.notify_all()

    def _problem(self, text: str) -> web.Response:
        with self._changed:
            self.problems.append(text)
        return web.json_response(error_body(500, text), status=500)

    async def _handle(self, http: web.Request) -> web.StreamResponse:
        raw = await http.read()
        body: JsonObject | None = None
        with contextlib.suppress(ValueError):
            parsed = json.loads(raw) if raw else None
            body = parsed if isinstance(parsed, dict) else None
        request = Request(
            method=http.method,
            path=http.path,
            query=dict(http.query),
            headers={k.lower(): v for k, v in http.headers.items()},
            body=body,
            received_at=time.time(),
        )
        if http.method != "POST" or request.model is None or http.query.get("alt") != "sse":
            return self._problem(f"unexpected request: {http.method} {http.path_qs}")
        turn = self._choose(request)
        if turn is None:
            self._record(request)
            return self._problem(f"no turn matches: {request.summary()}")
        request = dataclasses.replace(request, turn=turn.name)
        self._record(request)
        try:
            return await self._play(turn, request, http)
        except ConnectionResetError:
            # The client went away mid-answer (scaffold stopped the CLI): nobody to answer.
            return web.Response(status=499)
        except Exception as exc:  # a script's bug: reported, answered 500
            return self._problem(f"{turn.name} failed on {request.summary()}: {exc!r}")

    async def _play(self, turn: Turn, request: Request, http: web.Request) -> web.StreamResponse:
        if turn.stall is not None:
            assert self._closing is not None
            timeout = None if math.isinf(turn.stall) else turn.stall
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), timeout)
            if self._closing.is_set():
                return web.Response(status=503)
        if turn.http_status is not None:
            return web.json_response(
                error_body(turn.http_status, turn.error_message), status=turn.http_status
            )
        parts: list[JsonObject] = []
        for part in turn.reply:
            if isinstance(part, Text):
                parts.append({"text": part.text})
            else:
                args = part.args_for(request)
                with self._changed:
                    self._emitted[call_key(part.name, args)] = turn.name
                parts.append({"functionCall": {"name": part.name, "args": args}})
        response = web.StreamResponse(
            status=200, headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"}
        )
        await response.prepare(http)
        for frame in _frames(parts or [{"text": ""}], turn.usage, request.model):
            await response.write(frame)
        await response.write_eof()
        return response
