"""Read an agent's stream-json output (`claude -p --output-format stream-json --verbose`).

The agent prints one JSON object per line. This module turns those bytes into typed
events and a running `StreamSummary`, without doing any I/O of its own in the core:

    bytes --StreamDecoder.feed--> lines --parse_line--> Event --> StreamSummary

- `parse_line` types one line by its `type` (and `subtype` for `system`). An unknown
  type becomes `Unknown`: newer Claude Code versions add event types, and an old
  scaffold must keep working (consumers skip them; the summary counts them).
- A line that is not JSON, not an object, or has the wrong shape raises
  `StreamLineError` carrying the line number, the reason and a 200-byte excerpt.
  The decoder records it as a note and goes on: one bad line never ends a run.
- A line longer than the cap (1 MiB by default) is consumed and discarded chunk by
  chunk, never held whole, so memory stays flat for a 2 MB or a 1 GB line.
- `iter_events` (a binary file or any iterable of byte chunks) and `aiter_events`
  (an `asyncio.StreamReader`) are thin loops around the decoder.

Field names follow what Claude Code 2.1.x prints (see tests/fixtures/agent/).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar, NamedTuple, Protocol, runtime_checkable

from scaffold.errors import AgentError

if TYPE_CHECKING:
    import asyncio

__all__ = [
    "DEFAULT_CHUNK_BYTES",
    "DEFAULT_MAX_LINE_BYTES",
    "EXCERPT_BYTES",
    "MAX_MALFORMED_NOTES",
    "ApiRetry",
    "AssistantMessage",
    "Event",
    "MalformedLine",
    "McpServer",
    "ResultEvent",
    "StreamDecoder",
    "StreamLineError",
    "StreamSummary",
    "SystemInit",
    "Unknown",
    "UserMessage",
    "aiter_events",
    "iter_events",
    "parse_line",
]

DEFAULT_MAX_LINE_BYTES = 1024 * 1024
DEFAULT_CHUNK_BYTES = 64 * 1024
EXCERPT_BYTES = 200
MAX_MALFORMED_NOTES = 20

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


def _excerpt(line: bytes | bytearray) -> str:
    return bytes(line[:EXCERPT_BYTES]).decode("utf-8", "replace")


def _head(first: bytes | bytearray, second: bytes) -> bytes:
    """The first EXCERPT_BYTES of first+second, without copying either whole."""
    head = bytes(first[:EXCERPT_BYTES])
    return head + second[: EXCERPT_BYTES - len(head)]


def parse_line(line: bytes, line_no: int = 0) -> Event:
    """Type one stream-json line (without its newline). Raises `StreamLineError`."""
    try:
        data = json.loads(line.decode("utf-8"))
    except UnicodeDecodeError as exc:
        raise StreamLineError(line_no, f"not UTF-8 ({exc.reason})", _excerpt(line)) from None
    except ValueError as exc:  # json.JSONDecodeError
        reason = "blank line" if not line.strip() else f"not JSON ({exc})"
        raise StreamLineError(line_no, reason, _excerpt(line)) from None
    except RecursionError:
        raise StreamLineError(line_no, "JSON nested too deeply", _excerpt(line)) from None
    if type(data) is not dict:
        raise StreamLineError(
            line_no, f"expected a JSON object, got {type(data).__name__}", _excerpt(line)
        )
    type_ = data.get("type")
    if type(type_) is not str:
        raise StreamLineError(line_no, "object without a string 'type'", _excerpt(line))
    build = _BUILDERS.get(type_)
    if build is None:
        return _unknown(data, type_)
    try:
        event: Event = build(data)
    except _BadShape as exc:
        raise StreamLineError(line_no, f"{type_} event: {exc}", _excerpt(line)) from None
    return event


# --- summary ------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MalformedLine:
    """A note about one line that was skipped."""

    line_no: int
    reason: str
    excerpt: str


@dataclass(slots=True)
class StreamSummary:
    """What a run's output amounted to, updated as the lines arrive."""

    session_id: str | None = None
    init: SystemInit | None = None
    result: ResultEvent | None = None
    event_counts: dict[str, int] = field(default_factory=dict)
    unknown_types: dict[str, int] = field(default_factory=dict)
    lines: int = 0
    bytes_read: int = 0
    malformed_count: int = 0
    malformed: list[MalformedLine] = field(default_factory=list)
    peak_buffered_bytes: int = 0

    @property
    def total_cost_usd(self) -> float | None:
        """Cost from the last result event (Claude Code reports the run's total there)."""
        return self.result.total_cost_usd if self.result is not None else None

    @property
    def mcp_not_connected(self) -> tuple[McpServer, ...]:
        """MCP servers the newest init event reports as anything but "connected"."""
        return self.init.mcp_not_connected if self.init is not None else ()

    @property
    def events(self) -> int:
        return sum(self.event_counts.values())

    def note_malformed(self, line_no: int, reason: str, excerpt: str) -> None:
        self.malformed_count += 1
        if len(self.malformed) < MAX_MALFORMED_NOTES:
            self.malformed.append(MalformedLine(line_no, reason, excerpt))

    def observe(self, event: Event) -> None:
        kind = event.kind
        counts = self.event_counts
        counts[kind] = counts.get(kind, 0) + 1
        if event.session_id is not None:
            self.session_id = event.session_id
        if isinstance(event, ResultEvent):
            self.result = event
        elif isinstance(event, SystemInit):
            self.init = event
        elif isinstance(event, Unknown):
            name = f"{event.type}/{event.subtype}" if event.subtype else event.type
            self.unknown_types[name] = self.unknown_types.get(name, 0) + 1


# --- the incremental decoder -------------------------------------------------------


class StreamDecoder:
    """Sans-I/O line framer and parser: feed it byte chunks, get events back.

    It holds at most `max_line_bytes` of an incomplete line. A longer line is dropped
    as it streams past (only its first 200 bytes are kept for the note), so a runaway
    line costs no more memory than a normal one.
    """

    __slots__ = (
        "_discard_head",
        "_discard_len",
        "_discarding",
        "_line_no",
        "_pending",
        "max_line_bytes",
        "summary",
    )

    def __init__(
        self, max_line_bytes: int = DEFAULT_MAX_LINE_BYTES, summary: StreamSummary | None = None
    ) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self.max_line_bytes = max_line_bytes
        self.summary = summary if summary is not None else StreamSummary()
        self._pending = bytearray()
        self._discarding = False
        self._discard_len = 0
        self._discard_head = b""
        self._line_no = 0

    def feed(self, chunk: bytes) -> list[Event]:
        """Take the next chunk; return the events of every line it completes."""
        out: list[Event] = []
        if not chunk:
            return out
        self.summary.bytes_read += len(chunk)
        if self._discarding:
            nl = chunk.find(b"\n")
            part = chunk if nl < 0 else chunk[:nl]
            self._discard_len += len(part)
            if len(self._discard_head) < EXCERPT_BYTES:
                self._discard_head = _head(self._discard_head, part)
            if nl < 0:
                return out
            self._end_discard()
            chunk = chunk[nl + 1 :]
        pending = self._pending
        if pending:
            nl = chunk.find(b"\n")
            if nl < 0:
                self._hold(chunk)
                return out
            if len(pending) + nl > self.max_line_bytes:
                self._line_no += 1
                self._note_overlong(_head(pending, chunk[:nl]), len(pending) + nl)
                pending.clear()
            else:
                pending += chunk[:nl]
                self._note_peak()
                line = bytes(pending)
                pending.clear()
                self._take(line, out)
            chunk = chunk[nl + 1 :]
        lines = chunk.split(b"\n")
        tail = lines.pop()
        cap = self.max_line_bytes
        for line in lines:
            if len(line) > cap:
                self._line_no += 1
                self._note_overlong(line[:EXCERPT_BYTES], len(line))
            else:
                self._take(line, out)
        if tail:
            self._hold(tail)
        return out

    def finish(self) -> list[Event]:
        """End of stream: a last line without a newline still counts."""
        out: list[Event] = []
        if self._discarding:
            self._end_discard()
        elif self._pending:
            line = bytes(self._pending)
            self._pending.clear()
            self._take(line, out)
        return out

    # -- internals

    def _take(self, line: bytes, out: list[Event]) -> None:
        self._line_no += 1
        summary = self.summary
        summary.lines += 1
        if not line or line.isspace():
            return
        try:
            event = parse_line(line, self._line_no)
        except StreamLineError as exc:
            summary.note_malformed(exc.line_no, exc.reason, exc.excerpt)
            return
        summary.observe(event)
        out.append(event)

    def _hold(self, part: bytes) -> None:
        """Keep part of an unfinished line, or start dropping it if it is too long."""
        size = len(self._pending) + len(part)
        if size > self.max_line_bytes:
            self._discard_head = _head(self._pending, part)
            self._discarding = True
            self._discard_len = size
            self._pending.clear()
            return
        self._pending += part
        self._note_peak()

    def _note_peak(self) -> None:
        self.summary.peak_buffered_bytes = max(self.summary.peak_buffered_bytes, len(self._pending))

    def _end_discard(self) -> None:
        self._line_no += 1
        self._note_overlong(self._discard_head, self._discard_len)
        self._discarding = False
        self._discard_len = 0
        self._discard_head = b""

    def _note_overlong(self, head: bytes, size: int) -> None:
        self.summary.lines += 1
        self.summary.note_malformed(
            self._line_no,
            f"line of {size} bytes exceeds the {self.max_line_bytes}-byte limit; discarded",
            _excerpt(head),
        )


# --- sources ------------------------------------------------------------------------


@runtime_checkable
class _Readable(Protocol):
    def read(self, size: int = -1, /) -> bytes: ...


def iter_events(
    source: _Readable | Iterable[bytes],
    decoder: StreamDecoder | None = None,
    *,
    chunk_size: int = DEFAULT_CHUNK_BYTES,
) -> Iterator[Event]:
    """Events from a binary file (read in `chunk_size` pieces) or an iterable of chunks.

    A file is read with `.read(n)`, never iterated by line, so a huge line is never
    materialised. Pass a `decoder` to keep its `summary` afterwards.
    """
    dec = decoder if decoder is not None else StreamDecoder()
    chunks: Iterable[bytes]
    if isinstance(source, _Readable):
        read = source.read
        chunks = iter(lambda: read(chunk_size), b"")
    else:
        chunks = source
    for chunk in chunks:
        yield from dec.feed(chunk)
    yield from dec.finish()


async def aiter_events(
    reader: asyncio.StreamReader,
    decoder: StreamDecoder | None = None,
    *,
    chunk_size: int = DEFAULT_CHUNK_BYTES,
) -> AsyncIterator[Event]:
    """Events from an asyncio stream, read in chunks (not `readline`, whose limit
    would make a long line an exception instead of a note)."""
    dec = decoder if decoder is not None else StreamDecoder()
    while True:
        chunk = await reader.read(chunk_size)
        if not chunk:
            break
        for event in dec.feed(chunk):
            yield event
    for event in dec.finish():
        yield event
