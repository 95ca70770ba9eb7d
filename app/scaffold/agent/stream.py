"""Read an agent's stream-json output (`claude -p --output-format stream-json --verbose`).

The agent prints one JSON object per line. This module turns those bytes into typed
events and a running `StreamSummary`, without doing any I/O of its own in the core:

    bytes --StreamDecoder.feed--> lines --parse_line--> Event --> StreamSummary

- `parse_line` and the event types live in :mod:`scaffold.agent.stream_events` (and
  are exported here too). An unknown type becomes `Unknown` (consumers skip them; the
  summary counts them). A line `parse_line` refuses (`StreamLineError`) is recorded
  as a note and the decoder goes on: one bad line never ends a run.
- A line longer than the cap (1 MiB by default) is consumed and discarded chunk by
  chunk, never held whole, so memory stays flat for a 2 MB or a 1 GB line.
- `iter_events` (a binary file or any iterable of byte chunks) and `aiter_events`
  (an `asyncio.StreamReader`) are thin loops around the decoder.

Field names follow what Claude Code 2.1.x prints (see tests/fixtures/agent/).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol, runtime_checkable

from scaffold.agent.stream_events import (
    EXCERPT_BYTES,
    ApiRetry,
    AssistantMessage,
    Event,
    McpServer,
    ResultEvent,
    StreamLineError,
    SystemInit,
    Unknown,
    Usage,
    UserMessage,
    excerpt,
    excerpt_of,
    parse_line,
)

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
    "LineParser",
    "MalformedLine",
    "McpServer",
    "ResultEvent",
    "StreamDecoder",
    "StreamLineError",
    "StreamSummary",
    "SystemInit",
    "Unknown",
    "Usage",
    "UserMessage",
    "aiter_events",
    "iter_events",
    "parse_line",
]

# One line of an agent's output to one event (a backend's own format to scaffold's
# events); raises StreamLineError for a line it cannot understand.
LineParser = Callable[[bytes, int], Event]

DEFAULT_MAX_LINE_BYTES = 1024 * 1024
DEFAULT_CHUNK_BYTES = 64 * 1024
MAX_MALFORMED_NOTES = 20

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

    def __init__(
        self,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        summary: StreamSummary | None = None,
        parse: LineParser = parse_line,
    ) -> None:
        if max_line_bytes < 1:
            raise ValueError("max_line_bytes must be positive")
        self.max_line_bytes = max_line_bytes
        self.parse = parse
        self.summary = summary if summary is not None else StreamSummary()
        self._pending = bytearray()
        self._discarding = False
        self._discard_len = 0
        self._discard_head = b""
        self._line_no = 0

    def feed(self, chunk: bytes) -> list[Event]:
        """Take the next chunk; return the events of every line it completes."""
        out: list[Event] = []
        self.summary.bytes_read += len(chunk)
        *ends, tail = chunk.split(b"\n")
        for end in ends:
            self._end_line(end, out)
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
            event = self.parse(line, self._line_no)
        except StreamLineError as exc:
            summary.note_malformed(exc.line_no, exc.reason, exc.excerpt)
            return
        summary.observe(event)
        out.append(event)

    def _end_line(self, part: bytes, out: list[Event]) -> None:
        """``part`` ends the line begun by what is held (or being dropped)."""
        pending = self._pending
        if self._discarding:
            self._hold(part)
            self._end_discard()
        elif len(pending) + len(part) > self.max_line_bytes:
            self._line_no += 1
            self._note_overlong(excerpt_of(pending, part), len(pending) + len(part))
            pending.clear()
        elif pending:
            pending += part
            self._note_peak()
            line = bytes(pending)
            pending.clear()
            self._take(line, out)
        else:
            self._take(part, out)

    def _hold(self, part: bytes) -> None:
        """Keep part of an unfinished line, or start dropping it if it is too long."""
        if self._discarding:
            self._discard_len += len(part)
            self._discard_head = excerpt_of(self._discard_head, part)
            return
        size = len(self._pending) + len(part)
        if size > self.max_line_bytes:
            self._discard_head = excerpt_of(self._pending, part)
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
            excerpt(head),
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
