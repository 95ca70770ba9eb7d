"""A scripted OpenAI Responses API on loopback, for driving the real ``codex`` CLI offline.

The CLI is pointed at this server by the custom provider scaffold writes into the run's
``config.toml`` (``OPENAI_BASE_URL``, see :mod:`scaffold.agent.codex`). Every
``POST /v1/responses`` is matched against a *script* of `Turn` rules, like the Messages
API of ``tests/claude/messages_server.py``; a matching turn answers with output items
(assistant text, function calls) as the two server-sent events the CLI needs
(``response.output_item.done`` per item, then ``response.completed`` with the usage), or
fails on purpose (an HTTP status, ``response.failed``, a stall, a stream cut short).

How a request is recognised (`Request`):

- ``session_id``: the ``session-id`` header (the codex thread id);
- ``role`` / ``step``: from the description of ``signal_back`` in the ``mcp__scaffold``
  namespace when the tools are listed, else from scaffold's role instructions ("# You are
  <Role>", "`stepId` set to `X`") among the developer and user texts;
- ``user_text``: the newest real user text (texts starting with ``<`` are the CLI's own
  context blocks); ``prompt`` the first;
- ``tool_result``: the ``function_call_output`` ending the input, with the call it answers
  (found in the input itself, so it works after ``codex exec resume``).

Anything but ``POST /v1/responses`` on loopback is a problem, and so is a request for
another host: the tests send the CLI's outside traffic here as its HTTP(S) proxy
(`codex_env`), so an attempt to reach the internet lands here and fails the test.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import itertools
import json
import math
import re
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any, Self

from aiohttp import web

__all__ = [
    "Call",
    "Request",
    "ResponsesServer",
    "Text",
    "Turn",
    "Usage",
    "When",
    "chain",
    "codex_env",
    "mcp_tool",
    "shell",
    "signal_back",
]

JsonObject = dict[str, Any]
NAMESPACE = "mcp__scaffold"
_LOOPBACK = re.compile(r"^(127\.\d+\.\d+\.\d+|localhost|\[::1\])(:\d+)?$")


def codex_env(base_url: str, proxy_url: str) -> dict[str, str]:
    """What the codex agents need in scaffold's environment: the model host and key, and
    every other destination sent to ``proxy_url`` (this server), so it is seen."""
    loopback = "127.0.0.1,127.0.0.2,localhost"
    env = {"OPENAI_BASE_URL": base_url, "OPENAI_API_KEY": "sk-test-codex"}
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "https_proxy", "http_proxy"):
        env[name] = proxy_url
    env["NO_PROXY"] = env["no_proxy"] = loopback
    return env


# --------------------------------------------------------------------------- requests

_TOOL_STEP = re.compile(r"Report the outcome of step '([^']+)'")
_TOOL_ROLE = re.compile(r"As (\w+) you may send")
_PROMPT_ROLE = re.compile(r"^# You are (\w+)", re.MULTILINE)
_PROMPT_STEP = re.compile(r"`stepId` set to `([^`]+)`")


def _texts(item: Mapping[str, Any]) -> list[str]:
    content = item.get("content")
    if isinstance(content, str):
        return [content]
    if isinstance(content, list):
        return [str(c.get("text", "")) for c in content if isinstance(c, dict)]
    return []


def _output_text(output: Any) -> str:
    if isinstance(output, str):
        return output
    if isinstance(output, list):
        return "\n".join(str(c.get("text", "")) for c in output if isinstance(c, dict))
    return json.dumps(output)


@dataclass(frozen=True)
class ToolResult:
    """The ``function_call_output`` that ends a request, with the call it answers."""

    call_id: str
    name: str | None
    arguments: JsonObject | None
    text: str


@dataclass(frozen=True)
class Request:
    method: str
    path: str
    headers: dict[str, str]
    body: JsonObject | None
    received_at: float
    turn: str | None = None

    @property
    def session_id(self) -> str | None:
        return self.headers.get("session-id") or self.headers.get("thread-id")

    @property
    def model(self) -> str:
        return str((self.body or {}).get("model", ""))

    @property
    def input(self) -> list[JsonObject]:
        raw = (self.body or {}).get("input") or []
        return [i for i in raw if isinstance(i, dict)]

    def texts(self, role: str) -> list[str]:
        """The texts of ``role``'s messages, oldest first (the CLI's ``<...>`` blocks skipped)."""
        return [
            t
            for i in self.input
            if i.get("type", "message") == "message" and i.get("role") == role
            for t in _texts(i)
            if t.strip() and not t.lstrip().startswith("<")
        ]

    def user_texts(self) -> list[str]:
        return self.texts("user")

    @property
    def prompt(self) -> str:
        texts = self.user_texts()
        return texts[0] if texts else ""

    @property
    def user_text(self) -> str:
        texts = self.user_texts()
        return texts[-1] if texts else ""

    @property
    def instructions(self) -> str:
        return "\n".join(self.texts("developer"))

    def calls(self) -> list[JsonObject]:
        """Every function call of the conversation, oldest first."""
        return [i for i in self.input if i.get("type") == "function_call"]

    def outputs(self) -> list[JsonObject]:
        return [i for i in self.input if i.get("type") == "function_call_output"]

    def signal_calls(self) -> list[JsonObject]:
        """The ``signal-back`` calls made in this conversation, their arguments decoded."""
        return [
            json.loads(c.get("arguments") or "{}")
            for c in self.calls()
            if c.get("name") == "signal_back" and c.get("namespace") == NAMESPACE
        ]

    def output_of(self, call_id: str) -> str | None:
        for out in self.outputs():
            if out.get("call_id") == call_id:
                return _output_text(out.get("output"))
        return None

    @property
    def tool_result(self) -> ToolResult | None:
        items = self.input
        if not items or items[-1].get("type") != "function_call_output":
            return None
        last = items[-1]
        call_id = str(last.get("call_id", ""))
        call = next((c for c in reversed(self.calls()) if c.get("call_id") == call_id), None)
        args: JsonObject | None = None
        if call is not None:
            with contextlib.suppress(ValueError):
                args = json.loads(call.get("arguments") or "{}")
        return ToolResult(
            call_id=call_id,
            name=None if call is None else str(call.get("name")),
            arguments=args,
            text=_output_text(last.get("output")),
        )

    def _signal_description(self) -> str:
        for tool in (self.body or {}).get("tools") or []:
            if isinstance(tool, dict) and tool.get("name") == NAMESPACE:
                for inner in tool.get("tools") or []:
                    if isinstance(inner, dict) and inner.get("name") == "signal_back":
                        return str(inner.get("description", ""))
        return ""

    def _find(self, tool_re: re.Pattern[str], text_re: re.Pattern[str]) -> str | None:
        found = tool_re.search(self._signal_description())
        if found is None:
            for text in (*self.texts("developer"), *self.user_texts()):
                if found := text_re.search(text):
                    break
        return found.group(1) if found else None

    @property
    def role(self) -> str | None:
        found = self._find(_TOOL_ROLE, _PROMPT_ROLE)
        return found.lower() if found else None

    @property
    def step(self) -> str | None:
        return self._find(_TOOL_STEP, _PROMPT_STEP)

    def summary(self) -> str:
        result = self.tool_result
        last = f"output of {result.name}" if result else f"user text {self.user_text[:60]!r}"
        return (
            f"{self.method} {self.path} role={self.role} step={self.step} "
            f"items={len(self.input)} last={last}"
        )


# --------------------------------------------------------------------------- script

Arguments = JsonObject | Callable[[Request], JsonObject]


@dataclass(frozen=True)
class Text:
    text: str


@dataclass(frozen=True)
class Call:
    """A function call; ``arguments`` may be computed from the request (e.g. its step)."""

    name: str
    arguments: Arguments = field(default_factory=dict)
    namespace: str | None = None

    def arguments_for(self, request: Request) -> JsonObject:
        return self.arguments(request) if callable(self.arguments) else dict(self.arguments)


Item = Text | Call


def shell(cmd: str) -> Call:
    """A shell command (codex's ``exec_command``), run in the agent's working folder."""
    return Call("exec_command", {"cmd": cmd})


def mcp_tool(name: str, arguments: Arguments) -> Call:
    """A tool of scaffold's MCP server (hyphens become underscores in codex)."""
    return Call(name.replace("-", "_"), arguments, NAMESPACE)


def signal_back(signal: str = "complete", **fields: Any) -> Call:
    """A ``signal-back`` call; ``stepId`` is the step of the request it answers."""

    def payload(request: Request) -> JsonObject:
        if request.step is None:
            raise ScriptError(f"signal_back without a step in {request.summary()}")
        return {"signal": signal, "stepId": request.step, **fields}

    return mcp_tool("signal-back", payload)


@dataclass(frozen=True)
class Usage:
    input_tokens: int = 1000
    output_tokens: int = 100
    cached_input_tokens: int = 0


@dataclass(frozen=True)
class When:
    """What a request must look like for a `Turn` to answer it (every given field must hold).

    ``tool_result``: the request ends (or does not end) with a function call's output;
    ``after``: that output answers a call of the `Turn` of this name.
    """

    role: str | None = None
    step: str | None = None
    text: str | None = None
    tool_result: bool | None = None
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
        wants = True if self.after is not None else self.tool_result
        if wants is not None and (result is not None) != wants:
            return False
        if self.after is not None and result and emitted.get(result.call_id) != self.after:
            return False
        return self.match is None or self.match(request)

    def but(self, **changes: Any) -> When:
        return dataclasses.replace(self, **changes)


_names = itertools.count(1)


@dataclass
class Turn:
    """One rule: when a request matches, answer with ``reply`` (or fail on purpose).

    ``times`` caps how often it answers. Failures: ``http_status`` (with
    ``error_message``), ``failed`` (a ``response.failed`` event), ``cut`` (the items, then
    the stream ends without ``response.completed``), ``stall`` seconds before any byte
    (``math.inf``: until the server closes).
    """

    when: When = field(default_factory=When)
    reply: Sequence[Item] = ()
    name: str = ""
    times: int | None = None
    http_status: int | None = None
    error_message: str = "scripted failure"
    failed: bool = False
    cut: bool = False
    stall: float | None = None
    usage: Usage = field(default_factory=Usage)
    fired: int = field(default=0, compare=False)

    def __post_init__(self) -> None:
        if not self.name:
            self.name = f"turn-{next(_names)}"


def chain(
    *steps: Item | Sequence[Item],
    final: str | None = "Done.",
    when: When | None = None,
    name: str | None = None,
    **options: Any,
) -> list[Turn]:
    """A prompt, then one step per function call's output, then ``final`` text."""
    base = when or When()
    prefix = name or f"chain-{next(_names)}"
    all_steps = [[s] if isinstance(s, Text | Call) else list(s) for s in steps]
    if final is not None:
        all_steps.append([Text(final)])
    turns: list[Turn] = []
    previous: str | None = None
    for index, items in enumerate(all_steps):
        rule = base.but(tool_result=False) if previous is None else base.but(after=previous)
        turn = Turn(when=rule, reply=items, name=f"{prefix}.{index}", **options)
        turns.append(turn)
        previous = turn.name
    return turns


class ScriptError(Exception):
    """The script cannot answer a request (answered with HTTP 500, reported by `check`)."""


def _sse(event: JsonObject) -> bytes:
    return f"event: {event['type']}\ndata: {json.dumps(event)}\n\n".encode()


# --------------------------------------------------------------------------- server


class ResponsesServer:
    """The scripted Responses API on 127.0.0.1 at a random port, in its own thread.

    ``requests`` holds every ``POST /v1/responses``; ``problems`` the requests no turn
    matched, script errors, and anything else that reached the server (another path,
    another host through the proxy setting): `check` raises with the list.
    """

    def __init__(self, script: Sequence[Turn] = ()) -> None:
        self.script: list[Turn] = list(script)
        self.problems: list[str] = []
        self._requests: list[Request] = []
        self._emitted: dict[str, str] = {}
        self._ids = itertools.count(1)
        self._changed = threading.Condition()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._closing: asyncio.Event | None = None
        self._runner: web.ServerRunner | None = None
        self._port = 0

    def __enter__(self) -> Self:
        ready = threading.Event()

        def run() -> None:
            loop = asyncio.new_event_loop()
            self._loop = loop
            loop.run_until_complete(self._start())
            ready.set()
            try:
                loop.run_forever()
            finally:
                loop.run_until_complete(self._stop())
                loop.close()

        self._thread = threading.Thread(target=run, name="responses-server", daemon=True)
        self._thread.start()
        if not ready.wait(30):
            raise RuntimeError("ResponsesServer did not start within 30 s")
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

    async def _start(self) -> None:
        self._closing = asyncio.Event()
        # A low-level server: every request reaches _handle, proxy requests included.
        self._runner = web.ServerRunner(web.Server(self._handle), shutdown_timeout=1.0)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        self._port = int(self._runner.addresses[0][1])

    async def _stop(self) -> None:
        assert self._closing is not None
        self._closing.set()
        if self._runner is not None:
            await self._runner.cleanup()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self._port}/v1"

    @property
    def proxy_url(self) -> str:
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
                    raise TimeoutError(f"{count} requests expected; got {len(self._requests)}")
                self._changed.wait(left)
            return list(self._requests)

    def check(self) -> None:
        if self.problems:
            raise AssertionError("scripted Responses API:\n" + "\n".join(self.problems))

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

    def _problem(self, text: str) -> None:
        with self._changed:
            self.problems.append(text)

    async def _handle(self, http: web.BaseRequest) -> web.StreamResponse:
        host = http.headers.get("Host", "")
        if (
            http.method == "CONNECT"
            or not http.raw_path.startswith("/")
            or not _LOOPBACK.match(host)
        ):
            self._problem(f"outside traffic: {http.method} {http.raw_path} (Host: {host})")
            return web.Response(status=403, text="no outside traffic in tests")
        raw = await http.read()
        body: JsonObject | None = None
        with contextlib.suppress(ValueError):
            parsed = json.loads(raw) if raw else None
            body = parsed if isinstance(parsed, dict) else None
        request = Request(
            method=http.method,
            path=http.path,
            headers={k.lower(): v for k, v in http.headers.items()},
            body=body,
            received_at=time.time(),
        )
        if (http.method, http.path) != ("POST", "/v1/responses"):
            self._problem(f"unexpected request: {http.method} {http.path}")
            return web.json_response({"error": {"message": "no such route"}}, status=404)
        turn = self._choose(request)
        if turn is not None:
            request = dataclasses.replace(request, turn=turn.name)
        with self._changed:
            self._requests.append(request)
            self._changed.notify_all()
        if turn is None:
            problem = f"no turn matches: {request.summary()}"
            self._problem(problem)
            return web.json_response({"error": {"message": problem}}, status=400)
        try:
            return await self._play(turn, request, http)
        except ConnectionResetError:
            # The client went away mid-answer (scaffold stopped codex, e.g. at its turn
            # limit): nobody is left to answer.
            return web.Response(status=499)
        except Exception as exc:  # a bug in a script's callable: report it, answer 400
            self._problem(f"{turn.name} failed on {request.summary()}: {exc!r}")
            return web.json_response({"error": {"message": repr(exc)}}, status=400)

    async def _play(
        self, turn: Turn, request: Request, http: web.BaseRequest
    ) -> web.StreamResponse:
        assert self._closing is not None
        if turn.stall is not None:
            timeout = None if math.isinf(turn.stall) else turn.stall
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(self._closing.wait(), timeout)
            if self._closing.is_set():
                return web.Response(status=503)
        if turn.http_status is not None:
            body = {"error": {"message": turn.error_message, "type": "server_error"}}
            return web.json_response(body, status=turn.http_status)
        response_id = f"resp_{next(self._ids):06d}"
        items = [self._item(block, turn, request) for block in turn.reply]
        response = web.StreamResponse(status=200, headers={"Content-Type": "text/event-stream"})
        await response.prepare(http)
        for index, item in enumerate(items):
            done = {"type": "response.output_item.done", "output_index": index, "item": item}
            await response.write(_sse(done))
        if turn.failed:
            failed = {"id": response_id, "error": {"message": turn.error_message}}
            await response.write(_sse({"type": "response.failed", "response": failed}))
        elif not turn.cut:
            u = turn.usage
            usage = {
                "input_tokens": u.input_tokens,
                "input_tokens_details": {"cached_tokens": u.cached_input_tokens},
                "output_tokens": u.output_tokens,
                "output_tokens_details": {"reasoning_tokens": 0},
                "total_tokens": u.input_tokens + u.output_tokens,
            }
            completed = {"id": response_id, "usage": usage}
            await response.write(_sse({"type": "response.completed", "response": completed}))
        await response.write_eof()
        return response

    def _item(self, block: Item, turn: Turn, request: Request) -> JsonObject:
        if isinstance(block, Text):
            return {
                "type": "message",
                "role": "assistant",
                "id": f"msg_{next(self._ids):06d}",
                "content": [{"type": "output_text", "text": block.text, "annotations": []}],
            }
        call_id = f"call_{next(self._ids):06d}"
        with self._changed:
            self._emitted[call_id] = turn.name
        item: JsonObject = {
            "type": "function_call",
            "id": f"fc_{next(self._ids):06d}",
            "call_id": call_id,
            "name": block.name,
            "arguments": json.dumps(block.arguments_for(request)),
        }
        if block.namespace is not None:
            item["namespace"] = block.namespace
        return item
