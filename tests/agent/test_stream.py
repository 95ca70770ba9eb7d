"""The stream-json reader: typing lines, notes for bad ones, flat memory for huge ones."""

from __future__ import annotations

import asyncio
import io
import itertools
import json
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaffold.agent.stream import (
    DEFAULT_MAX_LINE_BYTES,
    EXCERPT_BYTES,
    MAX_MALFORMED_NOTES,
    ApiRetry,
    AssistantMessage,
    Event,
    McpServer,
    ResultEvent,
    StreamDecoder,
    StreamLineError,
    StreamSummary,
    SystemInit,
    Unknown,
    UserMessage,
    aiter_events,
    iter_events,
    parse_line,
)
from scaffold.errors import AgentError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "agent"


def line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def decode_all(
    data: bytes, *, chunk: int = 64 * 1024, cap: int = DEFAULT_MAX_LINE_BYTES
) -> tuple[list[Event], StreamSummary]:
    dec = StreamDecoder(cap)
    events = list(iter_events(io.BytesIO(data), dec, chunk_size=chunk))
    return events, dec.summary


RESULT = {
    "type": "result",
    "subtype": "success",
    "is_error": False,
    "num_turns": 2,
    "session_id": "s-1",
    "total_cost_usd": 0.25,
    "permission_denials": [],
    "result": "done",
    "stop_reason": "end_turn",
}


# --- the real Claude Code 2.1.197 output ----------------------------------------------


def test_real_claude_transcript_parses_into_typed_events() -> None:
    events, summary = decode_all((FIXTURES / "claude-stream.jsonl").read_bytes())

    assert [type(e) for e in events] == [
        SystemInit,
        AssistantMessage,
        AssistantMessage,
        UserMessage,
        AssistantMessage,
        ResultEvent,
    ]
    init = events[0]
    assert isinstance(init, SystemInit)
    assert init.mcp_servers == (McpServer("scaffold", "connected"),)
    assert init.version == "2.1.197"
    assert "Bash" in init.tools
    assert init.model
    # Both content blocks of the first message arrive as separate lines with one id.
    first, second = events[1], events[2]
    assert isinstance(first, AssistantMessage)
    assert isinstance(second, AssistantMessage)
    assert first.message_id == second.message_id
    assert first.text == "I will report back."
    assert second.tool_uses[0]["name"] == "mcp__scaffold__signal-back"
    user = events[3]
    assert isinstance(user, UserMessage)
    assert user.tool_results[0]["tool_use_id"] == second.tool_uses[0]["id"]
    result = events[-1]
    assert isinstance(result, ResultEvent)
    assert (result.subtype, result.is_error, result.num_turns) == ("success", False, 2)
    assert result.result == "Signalled completion."
    assert result.stop_reason == "end_turn"

    assert summary.session_id == init.session_id == result.session_id
    assert summary.total_cost_usd == pytest.approx(0.0032)
    assert summary.result is result
    assert summary.mcp_not_connected == ()
    assert summary.malformed_count == 0
    assert summary.event_counts == {"system_init": 1, "assistant": 3, "user": 1, "result": 1}


def test_real_api_error_transcript_has_retry_and_error_status() -> None:
    events, summary = decode_all((FIXTURES / "claude-stream-api-error.jsonl").read_bytes())

    retry = next(e for e in events if isinstance(e, ApiRetry))
    assert (retry.attempt, retry.max_retries, retry.error_status) == (1, 1, 500)
    assert summary.result is not None
    assert summary.result.is_error
    assert summary.result.api_error_status == 500
    assert summary.total_cost_usd == 0.0


def test_real_permission_denial_is_reported_in_the_result() -> None:
    _, summary = decode_all((FIXTURES / "claude-stream-denied.jsonl").read_bytes())

    assert summary.result is not None
    assert not summary.result.is_error
    denial = summary.result.permission_denials[0]
    assert denial["tool_name"] == "mcp__scaffold__signal-back"


# --- parse_line -------------------------------------------------------------------------


def test_parse_line_types_each_known_event() -> None:
    init = parse_line(
        line(
            {
                "type": "system",
                "subtype": "init",
                "session_id": "a",
                "tools": ["Bash"],
                "mcp_servers": [
                    {"name": "scaffold", "status": "connected"},
                    {"name": "backlog", "status": "failed"},
                    {"name": "slow", "status": "pending"},
                ],
                "model": "m",
                "claude_code_version": "2.1.197",
            }
        )
    )
    assert isinstance(init, SystemInit)
    assert [s.name for s in init.mcp_not_connected] == ["backlog", "slow"]
    assert isinstance(parse_line(line(RESULT)), ResultEvent)
    retry = parse_line(line({"type": "system", "subtype": "api_retry", "retry_delay_ms": 5}))
    assert isinstance(retry, ApiRetry)
    assert retry.retry_delay_ms == 5.0
    user = parse_line(line({"type": "user", "message": {"content": "plain text"}}))
    assert isinstance(user, UserMessage)
    assert user.content == ({"type": "text", "text": "plain text"},)


def test_surrounding_whitespace_and_crlf_are_accepted() -> None:
    assert isinstance(
        parse_line(b'  {"type": "result", "subtype": "s", "is_error": true}'), ResultEvent
    )
    events, summary = decode_all(line(RESULT).replace(b"\n", b"\r\n") * 2)
    assert [type(e) for e in events] == [ResultEvent, ResultEvent]
    assert summary.malformed_count == 0


def test_unknown_types_and_system_subtypes_are_kept_as_unknown() -> None:
    event = parse_line(line({"type": "stream_event", "session_id": "z", "event": {}}))
    assert event == Unknown(type="stream_event", subtype=None, session_id="z", raw={})
    status = parse_line(line({"type": "system", "subtype": "status"}))
    assert isinstance(status, Unknown)
    assert (status.type, status.subtype) == ("system", "status")


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"not json at all", "not JSON"),
        (b'{"type": "result"', "not JSON"),
        (b"[1, 2]", "expected a JSON object, got list"),
        (b'{"no_type": 1}', "without a string 'type'"),
        (b'{"type": "user"} {"type": "user"}', "Extra data"),
        (b'{"type": 7}', "without a string 'type'"),
        (b'{"type": "assistant"}', "'message' must be an object"),
        (b'{"type": "assistant", "message": {"content": [1]}}', "items must be objects"),
        (b'{"type": "result", "subtype": "success"}', "boolean 'is_error'"),
        (
            b'{"type":"result","subtype":"x","is_error":false,"total_cost_usd":"1"}',
            "'total_cost_usd' must be a number",
        ),
        (b'{"type": "system", "subtype": "init", "tools": [1]}', "'tools' must be a list"),
        (b'{"type": "user", "message": {}, "session_id": 5}', "'session_id' must be a string"),
        (b"\xff\xfe{}", "not UTF-8"),
        (b"[" * 200_000, "nested too deeply"),
    ],
)
def test_parse_line_errors_carry_line_number_reason_and_excerpt(raw: bytes, reason: str) -> None:
    with pytest.raises(StreamLineError) as info:
        parse_line(raw, 42)
    err = info.value
    assert isinstance(err, AgentError)
    assert err.line_no == 42
    assert reason in err.reason
    assert err.excerpt == raw[:EXCERPT_BYTES].decode("utf-8", "replace")
    assert "line 42" in str(err)


def test_excerpt_is_at_most_200_bytes() -> None:
    with pytest.raises(StreamLineError) as info:
        parse_line(b"x" * 5000)
    assert len(info.value.excerpt) == EXCERPT_BYTES


# --- the decoder ----------------------------------------------------------------------


def test_garbage_lines_become_notes_and_the_run_goes_on() -> None:
    data = b"".join(
        [
            line({"type": "system", "subtype": "init", "session_id": "s-1"}),
            b"[SandboxDebug] something on stdout\n",
            b"\n   \n\r\n",
            b'{"type": "assistant", "message": {"content": [\n',
            line(RESULT),
        ]
    )
    events, summary = decode_all(data, chunk=5)

    assert [type(e) for e in events] == [SystemInit, ResultEvent]
    assert summary.malformed_count == 2
    assert [n.line_no for n in summary.malformed] == [2, 6]
    assert summary.malformed[0].excerpt == "[SandboxDebug] something on stdout"
    assert summary.lines == 7


def test_only_twenty_notes_are_kept_but_all_are_counted() -> None:
    data = b"garbage\n" * 50 + line(RESULT)
    _, summary = decode_all(data)
    assert summary.malformed_count == 50
    assert len(summary.malformed) == MAX_MALFORMED_NOTES
    assert summary.result is not None


def test_newest_session_id_wins() -> None:
    data = (
        line({"type": "system", "subtype": "init", "session_id": "old"})
        + line({"type": "assistant", "message": {"content": []}, "session_id": "old"})
        + line({"type": "system", "subtype": "compact", "session_id": "new"})
        + line({"type": "assistant", "message": {"content": []}})
    )
    _, summary = decode_all(data)
    assert summary.session_id == "new"
    assert summary.unknown_types == {"system/compact": 1}


def test_total_cost_comes_from_the_last_result() -> None:
    data = line({**RESULT, "total_cost_usd": 1}) + line({**RESULT, "total_cost_usd": 0.5})
    _, summary = decode_all(data)
    assert summary.total_cost_usd == 0.5
    assert summary.event_counts == {"result": 2}


def test_unknown_types_are_counted_per_type() -> None:
    data = (
        line({"type": "stream_event"}) * 3
        + line({"type": "rate_limit_event"})
        + line({"type": "system", "subtype": "status"})
    )
    events, summary = decode_all(data)
    assert all(isinstance(e, Unknown) for e in events)
    assert summary.event_counts == {"unknown": 5}
    assert summary.unknown_types == {"stream_event": 3, "rate_limit_event": 1, "system/status": 1}


def test_last_line_without_newline_still_counts() -> None:
    events, _ = decode_all(line(RESULT).rstrip(b"\n"), chunk=7)
    assert [type(e) for e in events] == [ResultEvent]


@pytest.mark.parametrize("chunk", [16, 100, 4096, 64 * 1024, 3 * 1024 * 1024])
def test_two_megabyte_line_is_discarded_with_a_note_and_never_buffered(chunk: int) -> None:
    cap = 1024 * 1024
    huge = b'{"type": "assistant", "message": {"content": [{"text": "' + b"x" * 2_000_000 + b'"}]}}'
    data = (
        line({"type": "system", "subtype": "init", "session_id": "s"}) + huge + b"\n" + line(RESULT)
    )
    events, summary = decode_all(data, chunk=chunk, cap=cap)

    assert [type(e) for e in events] == [SystemInit, ResultEvent]
    assert summary.malformed_count == 1
    note = summary.malformed[0]
    assert note.line_no == 2
    assert f"line of {len(huge)} bytes exceeds" in note.reason
    assert note.excerpt == huge[:EXCERPT_BYTES].decode()
    # The decoder never holds more than the cap of an unfinished line.
    assert summary.peak_buffered_bytes <= cap


def test_a_gigabyte_line_keeps_memory_flat() -> None:
    """1 GiB of one line, fed as the same 64 KiB chunk over and over: the decoder's
    buffer stays under the cap and Python allocates almost nothing."""
    cap = 1024 * 1024
    block = b"y" * (64 * 1024)
    dec = StreamDecoder(cap)

    def source() -> Any:
        yield b'{"type": "assistant", "message": {"content": "'
        for _ in range(16 * 1024):
            yield block
        yield b'"}}\n'
        yield line(RESULT)

    tracemalloc.start()
    try:
        events = list(iter_events(source(), dec))
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert [type(e) for e in events] == [ResultEvent]
    assert dec.summary.malformed_count == 1
    assert dec.summary.peak_buffered_bytes <= cap
    assert peak < 4 * cap


def test_overlong_line_at_end_of_stream_is_noted() -> None:
    _, summary = decode_all(b"z" * 500, chunk=64, cap=100)
    assert summary.malformed_count == 1
    assert summary.malformed[0].excerpt == "z" * 200


@st.composite
def transcripts(draw: st.DrawFn) -> bytes:
    pieces = st.one_of(
        st.builds(
            lambda sid: line({"type": "system", "subtype": "init", "session_id": sid}),
            st.text(min_size=1, max_size=5),
        ),
        st.builds(
            lambda t: line(
                {"type": "assistant", "message": {"content": [{"type": "text", "text": t}]}}
            ),
            st.text(max_size=60),
        ),
        st.just(line(RESULT)),
        st.just(b"garbage\n"),
        st.just(b"\n"),
        st.builds(lambda n: b"q" * n + b"\n", st.integers(90, 300)),
        st.just(line({"type": "mystery"})),
    )
    return b"".join(draw(st.lists(pieces, max_size=12)))


@settings(max_examples=150, deadline=None)
@given(data=transcripts(), cuts=st.lists(st.integers(0, 4000), max_size=12))
def test_chunk_boundaries_do_not_change_the_outcome(data: bytes, cuts: list[int]) -> None:
    """However the bytes are split into chunks, events and notes are the same."""
    reference = StreamDecoder(120)
    expected = list(iter_events([data], reference))

    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    chunks = [data[a:b] for a, b in itertools.pairwise(points)]
    other = StreamDecoder(120)
    got = list(iter_events(chunks, other))

    assert got == expected
    assert other.summary.malformed == reference.summary.malformed
    assert other.summary.malformed_count == reference.summary.malformed_count
    assert other.summary.lines == reference.summary.lines
    assert other.summary.session_id == reference.summary.session_id
    assert other.summary.peak_buffered_bytes <= 120


# --- sources --------------------------------------------------------------------------


def test_asyncio_stream_reader_source() -> None:
    data = (FIXTURES / "claude-stream.jsonl").read_bytes() + b"junk\n"

    async def main() -> tuple[list[Event], StreamSummary]:
        reader = asyncio.StreamReader()
        for i in range(0, len(data), 333):
            reader.feed_data(data[i : i + 333])
        reader.feed_eof()
        dec = StreamDecoder()
        return [e async for e in aiter_events(reader, dec, chunk_size=100)], dec.summary

    events, summary = asyncio.run(main())
    assert len(events) == 6
    assert summary.malformed_count == 1
    assert summary.malformed[0].line_no == 7


def test_file_source_is_read_in_chunks_not_lines(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"w" * 300_000 + b"\n" + line(RESULT))
    dec = StreamDecoder(max_line_bytes=10_000)
    with path.open("rb") as fh:
        events = list(iter_events(fh, dec, chunk_size=4096))
    assert [type(e) for e in events] == [ResultEvent]
    assert dec.summary.peak_buffered_bytes <= 10_000
    assert dec.summary.bytes_read == path.stat().st_size


def test_decoder_rejects_a_nonpositive_cap() -> None:
    with pytest.raises(ValueError):
        StreamDecoder(0)
