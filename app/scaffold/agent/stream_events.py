"""What one stream-json line of Claude Code is: the typed events, and ``parse_line``.

``parse_line`` types a line by its ``type`` (and ``subtype`` for ``system``); an unknown
type becomes :class:`Unknown` (newer Claude Code versions add event types). A line that
is not JSON, not an object, or has the wrong shape raises :class:`StreamLineError`
with the line number, the reason and a 200-byte excerpt. :mod:`scaffold.agent.stream`
frames the bytes into lines and sums the events up.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, ClassVar, NamedTuple

from scaffold.errors import AgentError

EXCERPT_BYTES = 200

JsonObject = dict[str, Any]


class StreamLineError(AgentError):
    """One stream-json line could not be understood."""

    def __init__(self, line_no: int, reason: str, excerpt: str) -> None:
        super().__init__(f"stream-json line {line_no}: {reason}")
        self.line_no = line_no
        self.reason = reason
        self.excerpt = excerpt


# --- events -------------------------------------------------------------------------


class McpServer(NamedTuple):
    """One MCP server as the init event reports it."""

    name: str
    status: str

    @property
    def connected(self) -> bool:
        return self.status == "connected"


@dataclass(frozen=True, slots=True)
class SystemInit:
    """`system/init`: the session id, the tools and the MCP servers' state."""

    kind: ClassVar[str] = "system_init"
    session_id: str | None
    tools: tuple[str, ...]
    mcp_servers: tuple[McpServer, ...]
    model: str | None
    version: str | None
    raw: JsonObject = field(repr=False, compare=False)

    @property
    def mcp_not_connected(self) -> tuple[McpServer, ...]:
        return tuple(s for s in self.mcp_servers if not s.connected)


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """One `assistant` line; Claude Code prints each content block of a message as its
    own line with the same message id."""

    kind: ClassVar[str] = "assistant"
    session_id: str | None
    message_id: str | None
    content: tuple[JsonObject, ...]
    model: str | None
    error: str | None
    raw: JsonObject = field(repr=False, compare=False)

    @property
    def tool_uses(self) -> tuple[JsonObject, ...]:
        return tuple(b for b in self.content if b.get("type") == "tool_use")

    @property
    def text(self) -> str:
        return "".join(str(b.get("text", "")) for b in self.content if b.get("type") == "text")


@dataclass(frozen=True, slots=True)
class UserMessage:
    """One `user` line: in print mode these carry tool results back to the model."""

    kind: ClassVar[str] = "user"
    session_id: str | None
    content: tuple[JsonObject, ...]
    raw: JsonObject = field(repr=False, compare=False)

    @property
    def tool_results(self) -> tuple[JsonObject, ...]:
        return tuple(b for b in self.content if b.get("type") == "tool_result")


@dataclass(frozen=True, slots=True)
class ApiRetry:
    """`system/api_retry`: the CLI is retrying a failed API request."""

    kind: ClassVar[str] = "api_retry"
    session_id: str | None
    attempt: int | None
    max_retries: int | None
    retry_delay_ms: float | None
    error_status: int | None
    error: str | None
    raw: JsonObject = field(repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class Usage:
    """Tokens a run used. ``input_tokens`` counts every prompt token, cached ones
    included; ``cached_input_tokens`` says how many of them were read from a cache."""

    input_tokens: int = 0
    output_tokens: int = 0
    cached_input_tokens: int = 0


@dataclass(frozen=True, slots=True)
class ResultEvent:
    """The last line of a run. An API error is `is_error: true` (subtype may still be
    "success") with `api_error_status` set."""

    kind: ClassVar[str] = "result"
    subtype: str
    is_error: bool
    num_turns: int | None
    session_id: str | None
    total_cost_usd: float | None
    permission_denials: tuple[JsonObject, ...]
    api_error_status: int | None
    result: str | None
    stop_reason: str | None
    raw: JsonObject = field(repr=False, compare=False)
    # The tokens of the run, where the agent reports them; the model that used them.
    usage: Usage | None = None
    model: str | None = None
    # Made by scaffold's parser, not the agent: the turn limit of a CLI that has none
    # was passed, and the agent must be stopped.
    turn_limit_passed: bool = False


@dataclass(frozen=True, slots=True)
class Unknown:
    """An event type (or system subtype) this version does not model; kept for logs."""

    kind: ClassVar[str] = "unknown"
    type: str
    subtype: str | None
    session_id: str | None
    raw: JsonObject = field(repr=False, compare=False)


Event = SystemInit | AssistantMessage | UserMessage | ApiRetry | ResultEvent | Unknown


# --- parsing one line ---------------------------------------------------------------


class _BadShape(Exception):
    """Internal: a known event with a field of the wrong type."""


def _opt_str(d: JsonObject, key: str) -> str | None:
    v = d.get(key)
    if v is None or type(v) is str:
        return v
    raise _BadShape(f"{key!r} must be a string, got {type(v).__name__}")


def _opt_int(d: JsonObject, key: str) -> int | None:
    v = d.get(key)
    if v is None or type(v) is int:
        return v
    raise _BadShape(f"{key!r} must be an integer, got {type(v).__name__}")


def _opt_float(d: JsonObject, key: str) -> float | None:
    v = d.get(key)
    if v is None or type(v) is float:
        return v
    if type(v) is int:
        return float(v)
    raise _BadShape(f"{key!r} must be a number, got {type(v).__name__}")


def _object(d: JsonObject, key: str) -> JsonObject:
    v = d.get(key)
    if type(v) is dict:
        return v
    raise _BadShape(f"{key!r} must be an object, got {type(v).__name__}")


def _blocks(d: JsonObject, key: str) -> tuple[JsonObject, ...]:
    v = d.get(key)
    if v is None:
        return ()
    if type(v) is str:  # a plain-text user turn
        return ({"type": "text", "text": v},)
    if type(v) is not list:
        raise _BadShape(f"{key!r} must be a list, got {type(v).__name__}")
    for b in v:
        if type(b) is not dict:
            raise _BadShape(f"{key!r} items must be objects, got {type(b).__name__}")
    return tuple(v)


def _assistant(d: JsonObject) -> AssistantMessage:
    msg = _object(d, "message")
    return AssistantMessage(
        session_id=_opt_str(d, "session_id"),
        message_id=_opt_str(msg, "id"),
        content=_blocks(msg, "content"),
        model=_opt_str(msg, "model"),
        error=_opt_str(d, "error"),
        raw=d,
    )


def _user(d: JsonObject) -> UserMessage:
    msg = _object(d, "message")
    return UserMessage(session_id=_opt_str(d, "session_id"), content=_blocks(msg, "content"), raw=d)


def _result(d: JsonObject) -> ResultEvent:
    subtype = d.get("subtype")
    if type(subtype) is not str:
        raise _BadShape("result without a string 'subtype'")
    is_error = d.get("is_error")
    if type(is_error) is not bool:
        raise _BadShape("result without a boolean 'is_error'")
    return ResultEvent(
        subtype=subtype,
        is_error=is_error,
        num_turns=_opt_int(d, "num_turns"),
        session_id=_opt_str(d, "session_id"),
        total_cost_usd=_opt_float(d, "total_cost_usd"),
        permission_denials=_blocks(d, "permission_denials"),
        api_error_status=_opt_int(d, "api_error_status"),
        result=_opt_str(d, "result"),
        stop_reason=_opt_str(d, "stop_reason"),
        raw=d,
        usage=_claude_usage(d.get("usage")),
    )


def count(d: JsonObject, key: str) -> int:
    """A token count: a non-negative integer, else 0."""
    value = d.get(key)
    return value if type(value) is int and value >= 0 else 0


def _claude_usage(raw: object) -> Usage | None:
    """Claude Code's ``usage``: cache reads and writes are prompt tokens too."""
    if not isinstance(raw, dict):
        return None
    cached = count(raw, "cache_read_input_tokens")
    written = count(raw, "cache_creation_input_tokens")
    return Usage(
        input_tokens=count(raw, "input_tokens") + cached + written,
        output_tokens=count(raw, "output_tokens"),
        cached_input_tokens=cached,
    )


def _init(d: JsonObject) -> SystemInit:
    tools = d.get("tools") or []
    if type(tools) is not list or not all(type(t) is str for t in tools):
        raise _BadShape("'tools' must be a list of strings")
    servers = []
    for s in _blocks(d, "mcp_servers"):
        name, status = s.get("name"), s.get("status")
        if type(name) is not str or type(status) is not str:
            raise _BadShape("'mcp_servers' items need string 'name' and 'status'")
        servers.append(McpServer(name, status))
    return SystemInit(
        session_id=_opt_str(d, "session_id"),
        tools=tuple(tools),
        mcp_servers=tuple(servers),
        model=_opt_str(d, "model"),
        version=_opt_str(d, "claude_code_version"),
        raw=d,
    )


def _api_retry(d: JsonObject) -> ApiRetry:
    return ApiRetry(
        session_id=_opt_str(d, "session_id"),
        attempt=_opt_int(d, "attempt"),
        max_retries=_opt_int(d, "max_retries"),
        retry_delay_ms=_opt_float(d, "retry_delay_ms"),
        error_status=_opt_int(d, "error_status"),
        error=_opt_str(d, "error"),
        raw=d,
    )


def _unknown(d: JsonObject, type_: str) -> Unknown:
    sub = d.get("subtype")
    sid = d.get("session_id")
    return Unknown(
        type=type_,
        subtype=sub if type(sub) is str else None,
        session_id=sid if type(sid) is str else None,
        raw=d,
    )


def _system(d: JsonObject) -> Event:
    sub = d.get("subtype")
    if sub == "init":
        return _init(d)
    if sub == "api_retry":
        return _api_retry(d)
    return _unknown(d, "system")


_BUILDERS: Mapping[str, Callable[[JsonObject], Event]] = {
    "assistant": _assistant,
    "user": _user,
    "result": _result,
    "system": _system,
}


def excerpt(line: bytes | bytearray) -> str:
    return bytes(line[:EXCERPT_BYTES]).decode("utf-8", "replace")


def excerpt_of(first: bytes | bytearray, second: bytes) -> bytes:
    """The first EXCERPT_BYTES of first+second, without copying either whole."""
    head = bytes(first[:EXCERPT_BYTES])
    return head + second[: EXCERPT_BYTES - len(head)]


def load_line(line: bytes, line_no: int) -> tuple[JsonObject, str]:
    """One JSON-lines object and its ``type`` (every agent CLI prints these); raises
    `StreamLineError` for anything else."""
    try:
        data = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise StreamLineError(line_no, f"not UTF-8 ({exc.reason})", excerpt(line)) from None
    except ValueError as exc:  # json.JSONDecodeError
        reason = "blank line" if not line.strip() else f"not JSON ({exc})"
        raise StreamLineError(line_no, reason, excerpt(line)) from None
    except RecursionError:
        raise StreamLineError(line_no, "JSON nested too deeply", excerpt(line)) from None
    if type(data) is not dict:
        raise StreamLineError(
            line_no, f"expected a JSON object, got {type(data).__name__}", excerpt(line)
        )
    type_ = data.get("type")
    if type(type_) is not str:
        raise StreamLineError(line_no, "object without a string 'type'", excerpt(line))
    return data, type_


def parse_line(line: bytes, line_no: int = 0) -> Event:
    """Type one stream-json line (without its newline). Raises `StreamLineError`."""
    data, type_ = load_line(line, line_no)
    build = _BUILDERS.get(type_)
    if build is None:
        return _unknown(data, type_)
    try:
        event: Event = build(data)
    except _BadShape as exc:
        raise StreamLineError(line_no, f"{type_} event: {exc}", excerpt(line)) from None
    return event
