"""Read an agent's output: one JSON object per line, typed into events and summed up.

    bytes --StreamDecoder.feed--> lines --parse--> Event --> StreamSummary

:func:`parse_line` types a line of Claude Code's stream-json (``claude -p --output-format
stream-json --verbose``) by its ``type`` (and ``subtype`` for ``system``); the other
backends bring their own parser (:data:`LineParser`) to the same events. An unknown type
becomes :class:`Unknown` (newer CLIs add event types). A line that is not JSON, not an
object, or has the wrong shape raises :class:`StreamLineError`; the decoder counts it
and goes on: one bad line never ends a run. A line longer than the cap (1 MiB by
default) is dropped chunk by chunk as it streams past, never held whole.

Field names follow what Claude Code 2.1.x prints (see tests/fixtures/agent/).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, NamedTuple

from scaffold.errors import AgentError

DEFAULT_MAX_LINE_BYTES = 1024 * 1024
DEFAULT_CHUNK_BYTES = 64 * 1024

JsonObject = dict[str, Any]
_CACHE_READ = "cache_read_input_tokens"


class StreamLineError(AgentError):
    """One output line could not be understood."""

    def __init__(self, line_no: int, reason: str) -> None:
        super().__init__(f"stream-json line {line_no}: {reason}")
        self.line_no = line_no
        self.reason = reason


# --- events -------------------------------------------------------------------------


class McpServer(NamedTuple):
    """One MCP server as the init event reports it."""

    name: str
    status: str


@dataclass(frozen=True, slots=True)
class SystemInit:
    """The run's first event: its session id and the MCP servers' state."""

    session_id: str | None = None
    mcp_servers: tuple[McpServer, ...] = ()
    raw: JsonObject = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class AssistantMessage:
    """The model's text or tool calls; Claude Code prints each content block of a
    message as its own line."""

    session_id: str | None
    content: tuple[JsonObject, ...]
    raw: JsonObject = field(default_factory=dict, repr=False, compare=False)


@dataclass(frozen=True, slots=True)
class UserMessage:
    """In print mode, mostly tool results carried back to the model."""

    session_id: str | None
    content: tuple[JsonObject, ...]
    raw: JsonObject = field(default_factory=dict, repr=False, compare=False)


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

    subtype: str
    is_error: bool
    num_turns: int | None = None
    session_id: str | None = None
    total_cost_usd: float | None = None
    permission_denials: tuple[JsonObject, ...] = ()
    api_error_status: int | None = None
    result: str | None = None
    raw: JsonObject = field(default_factory=dict, repr=False, compare=False)
    # The tokens of the run, where the agent reports them.
    usage: Usage | None = None
    # Made by scaffold's parser, not the agent: the turn limit of a CLI that has none
    # was passed, and the agent must be stopped.
    turn_limit_passed: bool = False


@dataclass(frozen=True, slots=True)
class Unknown:
    """An event type (or system subtype) scaffold does not model; kept for logs."""

    type: str
    subtype: str | None
    session_id: str | None
    raw: JsonObject = field(default_factory=dict, repr=False, compare=False)


Event = SystemInit | AssistantMessage | UserMessage | ResultEvent | Unknown

# One line of an agent's output to one event (a backend's own format to scaffold's
# events); raises StreamLineError for a line it cannot understand.
LineParser = Callable[[bytes, int], Event]


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


def _count(d: JsonObject, key: str) -> int:
    """A token count: a non-negative integer, else 0."""
    value = d.get(key)
    return value if type(value) is int and value >= 0 else 0


def token_usage(raw: object, cached: str, *more_input: str) -> Usage | None:
    """The tokens of a usage object (None if it is no object): ``input_tokens``, plus
    the ``more_input`` counts a CLI keeps apart; ``cached``: those read from a cache."""
    if not isinstance(raw, dict):
        return None
    return Usage(
        input_tokens=_count(raw, "input_tokens") + sum(_count(raw, k) for k in more_input),
        output_tokens=_count(raw, "output_tokens"),
        cached_input_tokens=_count(raw, cached),
    )


def _message(d: JsonObject) -> tuple[str | None, tuple[JsonObject, ...], JsonObject]:
    return _opt_str(d, "session_id"), _blocks(_object(d, "message"), "content"), d


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
        raw=d,
        # Claude Code's cache reads and writes are prompt tokens too.
        usage=token_usage(d.get("usage"), _CACHE_READ, _CACHE_READ, "cache_creation_input_tokens"),
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
    if d.get("subtype") != "init":
        return _unknown(d, "system")
    tools = d.get("tools") or []
    if type(tools) is not list or not all(type(t) is str for t in tools):
        raise _BadShape("'tools' must be a list of strings")
    servers = []
    for s in _blocks(d, "mcp_servers"):
        name, status = s.get("name"), s.get("status")
        if type(name) is not str or type(status) is not str:
            raise _BadShape("'mcp_servers' items need string 'name' and 'status'")
        servers.append(McpServer(name, status))
    return SystemInit(_opt_str(d, "session_id"), tuple(servers), d)


_BUILDERS: Mapping[str, Callable[[JsonObject], Event]] = {
    "assistant": lambda d: AssistantMessage(*_message(d)),
    "user": lambda d: UserMessage(*_message(d)),
    "result": _result,
    "system": _system,
}


def load_line(line: bytes, line_no: int) -> tuple[JsonObject, str]:
    """One JSON-lines object and its ``type`` (every agent CLI prints these); raises
    `StreamLineError` for anything else."""
    try:
        data = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise StreamLineError(line_no, f"not UTF-8 ({exc.reason})") from None
    except ValueError as exc:  # json.JSONDecodeError
        raise StreamLineError(line_no, f"not JSON ({exc})") from None
    except RecursionError:
        raise StreamLineError(line_no, "JSON nested too deeply") from None
    if type(data) is not dict:
        raise StreamLineError(line_no, f"expected a JSON object, got {type(data).__name__}")
    type_ = data.get("type")
    if type(type_) is not str:
        raise StreamLineError(line_no, "object without a string 'type'")
    return data, type_


def parse_line(line: bytes, line_no: int = 0) -> Event:
    """Type one stream-json line (without its newline). Raises `StreamLineError`."""
    data, type_ = load_line(line, line_no)
    build = _BUILDERS.get(type_)
    if build is None:
        return _unknown(data, type_)
    try:
        return build(data)
    except _BadShape as exc:
        raise StreamLineError(line_no, f"{type_} event: {exc}") from None


# --- the summary and the incremental decoder ---------------------------------------


@dataclass(slots=True)
class StreamSummary:
    """What a run's output amounted to, updated as the lines arrive."""

    session_id: str | None = None
    result: ResultEvent | None = None
    malformed_count: int = 0

    @property
    def total_cost_usd(self) -> float | None:
        """Cost from the last result event (Claude Code reports the run's total there)."""
        return self.result.total_cost_usd if self.result is not None else None

    def observe(self, event: Event) -> None:
        if event.session_id is not None:
            self.session_id = event.session_id
        if isinstance(event, ResultEvent):
            self.result = event


class StreamDecoder:
    """Sans-I/O line framer and parser: feed it byte chunks, get events back.

    It holds at most `max_line_bytes` of an unfinished line; a longer line is counted
    as malformed and dropped as it streams past.
    """

    def __init__(
        self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, parse: LineParser = parse_line
    ) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self.max_line_bytes = max_line_bytes
        self.parse = parse
        self.summary = StreamSummary()
        self._pending = bytearray()
        self._dropping = False  # the line under way is too long
        self._line_no = 0

    def feed(self, chunk: bytes) -> list[Event]:
        """Take the next chunk; return the events of every line it completes."""
        out: list[Event] = []
        *ends, tail = chunk.split(b"\n")
        for end in ends:
            self._hold(end)
            self._end_line(out)
        self._hold(tail)
        return out

    def finish(self) -> list[Event]:
        """End of stream: a last line without a newline still counts."""
        out: list[Event] = []
        if self._pending or self._dropping:
            self._end_line(out)
        return out

    def _hold(self, part: bytes) -> None:
        if self._dropping:
            return
        if len(self._pending) + len(part) > self.max_line_bytes:
            self._dropping = True
            self._pending.clear()
        else:
            self._pending += part

    def _end_line(self, out: list[Event]) -> None:
        self._line_no += 1
        line = bytes(self._pending)
        self._pending.clear()
        if self._dropping:
            self._dropping = False
            self.summary.malformed_count += 1
            return
        if not line or line.isspace():
            return
        try:
            event = self.parse(line, self._line_no)
        except StreamLineError:
            self.summary.malformed_count += 1
            return
        self.summary.observe(event)
        out.append(event)
