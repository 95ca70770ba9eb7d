"""The stream-json reader: typing lines, counting bad ones, flat memory for huge ones."""

from __future__ import annotations

import itertools
import json
import tracemalloc
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scaffold.agent.stream import (
    DEFAULT_MAX_LINE_BYTES,
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
    parse_line,
)
from scaffold.errors import AgentError

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "agent"


def line(obj: dict[str, Any]) -> bytes:
    return json.dumps(obj).encode() + b"\n"


def feed_all(chunks: Iterable[bytes], dec: StreamDecoder) -> list[Event]:
    events = [e for chunk in chunks for e in dec.feed(chunk)]
    return events + dec.finish()


def decode_all(
    data: bytes, *, chunk: int = 64 * 1024, cap: int = DEFAULT_MAX_LINE_BYTES
) -> tuple[list[Event], StreamSummary]:
    dec = StreamDecoder(cap)
    events = feed_all((data[i : i + chunk] for i in range(0, len(data), chunk)), dec)
    return events, dec.summary


def blocks(event: AssistantMessage | UserMessage, kind: str) -> list[dict[str, Any]]:
    return [b for b in event.content if b.get("type") == kind]


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
    # Both content blocks of the first message arrive as separate lines.
    first, second = events[1], events[2]
    assert isinstance(first, AssistantMessage)
    assert isinstance(second, AssistantMessage)
    assert blocks(first, "text")[0]["text"] == "I will report back."
    [use] = blocks(second, "tool_use")
    assert use["name"] == "mcp__scaffold__signal-back"
    user = events[3]
    assert isinstance(user, UserMessage)
    assert blocks(user, "tool_result")[0]["tool_use_id"] == use["id"]
    result = events[-1]
    assert isinstance(result, ResultEvent)
    assert (result.subtype, result.is_error, result.num_turns) == ("success", False, 2)
    assert result.result == "Signalled completion."

    assert summary.session_id == init.session_id == result.session_id
    assert summary.total_cost_usd == pytest.approx(0.0032)
    assert summary.result is result
    assert summary.malformed_count == 0


def test_real_api_error_transcript_has_the_error_status() -> None:
    events, summary = decode_all((FIXTURES / "claude-stream-api-error.jsonl").read_bytes())

    retry = next(e for e in events if isinstance(e, Unknown))
    assert (retry.type, retry.subtype) == ("system", "api_retry")
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
    assert [s.status for s in init.mcp_servers] == ["connected", "failed", "pending"]
    assert isinstance(parse_line(line(RESULT)), ResultEvent)
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
def test_parse_line_errors_carry_line_number_and_reason(raw: bytes, reason: str) -> None:
    with pytest.raises(StreamLineError) as info:
        parse_line(raw, 42)
    err = info.value
    assert isinstance(err, AgentError)
    assert err.line_no == 42
    assert reason in err.reason
    assert "line 42" in str(err)


# --- the decoder ----------------------------------------------------------------------


def test_garbage_lines_are_counted_and_the_run_goes_on() -> None:
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


def test_newest_session_id_wins() -> None:
    data = (
        line({"type": "system", "subtype": "init", "session_id": "old"})
        + line({"type": "assistant", "message": {"content": []}, "session_id": "old"})
        + line({"type": "system", "subtype": "compact", "session_id": "new"})
        + line({"type": "assistant", "message": {"content": []}})
    )
    _, summary = decode_all(data)
    assert summary.session_id == "new"


def test_total_cost_comes_from_the_last_result() -> None:
    data = line({**RESULT, "total_cost_usd": 1}) + line({**RESULT, "total_cost_usd": 0.5})
    _, summary = decode_all(data)
    assert summary.total_cost_usd == 0.5


def test_last_line_without_newline_still_counts() -> None:
    events, _ = decode_all(line(RESULT).rstrip(b"\n"), chunk=7)
    assert [type(e) for e in events] == [ResultEvent]


@pytest.mark.parametrize("chunk", [16, 100, 4096, 64 * 1024, 3 * 1024 * 1024])
def test_two_megabyte_line_is_discarded_and_counted(chunk: int) -> None:
    cap = 1024 * 1024
    huge = b'{"type": "assistant", "message": {"content": [{"text": "' + b"x" * 2_000_000 + b'"}]}}'
    data = (
        line({"type": "system", "subtype": "init", "session_id": "s"}) + huge + b"\n" + line(RESULT)
    )
    events, summary = decode_all(data, chunk=chunk, cap=cap)

    assert [type(e) for e in events] == [SystemInit, ResultEvent]
    assert summary.malformed_count == 1


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
        events = feed_all(source(), dec)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()

    assert [type(e) for e in events] == [ResultEvent]
    assert dec.summary.malformed_count == 1
    assert peak < 4 * cap


def test_overlong_line_at_end_of_stream_is_counted() -> None:
    _, summary = decode_all(b"z" * 500, chunk=64, cap=100)
    assert summary.malformed_count == 1


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
    """However the bytes are split into chunks, events and counts are the same."""
    reference = StreamDecoder(120)
    expected = feed_all([data], reference)

    points = sorted({c % (len(data) + 1) for c in cuts} | {0, len(data)})
    chunks = [data[a:b] for a, b in itertools.pairwise(points)]
    other = StreamDecoder(120)
    got = feed_all(chunks, other)

    assert got == expected
    assert other.summary.malformed_count == reference.summary.malformed_count
    assert other.summary.session_id == reference.summary.session_id


def test_decoder_rejects_a_nonpositive_cap() -> None:
    with pytest.raises(ValueError):
        StreamDecoder(0)
