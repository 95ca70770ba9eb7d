"""signal-back answered by scaffold itself: the run's endpoint holds the binding."""

from __future__ import annotations

import asyncio
import json
import socket
import tempfile
from pathlib import Path

import pytest

from scaffold.agent.signal_relay import SignalEndpoint, relay_request
from scaffold.agent.signal_server import Binding, latest_signal
from scaffold.roles import Role


def _socket_dir() -> Path:
    return Path(tempfile.mkdtemp(prefix="relay-"))  # short: unix socket paths are limited


async def _ask(path: Path, request: dict[str, object]) -> dict[str, object]:
    return await asyncio.to_thread(relay_request, str(path), request)


async def test_the_endpoint_lists_the_role_tools_and_stores_a_signal_before_answering(
    tmp_path: Path,
) -> None:
    signals = tmp_path / "signals"
    binding = Binding(signals, "TASK-3", Role.CODEWEAVER, "quest-1", tmp_path)
    sock = _socket_dir() / "signal.sock"
    async with SignalEndpoint(binding, sock) as endpoint:
        listed = await _ask(sock, {"op": "list"})
        assert [t["name"] for t in listed["tools"]] == ["signal-back"]  # type: ignore[union-attr]
        reply = await _ask(
            sock,
            {
                "op": "call",
                "name": "signal-back",
                "arguments": {"signal": "complete", "stepId": "TASK-3", "summary": "done"},
            },
        )
        assert reply["is_error"] is False
        # Durable before the answer: the file is there as soon as the agent hears back.
        record = latest_signal(signals)
        assert record is not None
        assert record.step_id == "TASK-3"
        assert record.quest_id == "quest-1"
        assert endpoint.signalled.is_set()


async def test_planners_get_their_planning_tool(tmp_path: Path) -> None:
    binding = Binding(tmp_path / "s", "PLAN", Role.PATHSEEKER, "quest-1", tmp_path)
    sock = _socket_dir() / "signal.sock"
    async with SignalEndpoint(binding, sock):
        listed = await _ask(sock, {"op": "list"})
    assert [t["name"] for t in listed["tools"]] == ["signal-back", "create-tasks"]  # type: ignore[union-attr]


async def test_another_step_a_bad_request_and_a_replay_after_the_run_are_refused(
    tmp_path: Path,
) -> None:
    signals = tmp_path / "signals"
    binding = Binding(signals, "TASK-3", Role.CODEWEAVER, "quest-1", tmp_path)
    sock = _socket_dir() / "signal.sock"
    forged = {
        "op": "call",
        "name": "signal-back",
        "arguments": {"signal": "complete", "stepId": "TASK-4", "summary": "not mine"},
    }
    async with SignalEndpoint(binding, sock) as endpoint:
        reply = await _ask(sock, forged)
        assert reply["is_error"] is True
        assert "not your step" in str(reply["text"])
        assert (await _ask(sock, {"op": "call", "name": 7}))["is_error"] is True
        assert (await _ask(sock, {"op": "call", "name": "x", "arguments": []}))["is_error"]
        raw = await asyncio.to_thread(_raw, sock, b"{not json\n")
        assert json.loads(raw)["is_error"] is True
        assert not endpoint.signalled.is_set()
    assert latest_signal(signals) is None
    # The step is over: its endpoint is gone, so a replay reaches nothing.
    forged["arguments"] = {"signal": "complete", "stepId": "TASK-3", "summary": "replayed"}
    with pytest.raises(OSError):
        await _ask(sock, forged)
    assert latest_signal(signals) is None


def _raw(path: Path, data: bytes) -> bytes:
    with socket.socket(socket.AF_UNIX) as s:
        s.connect(str(path))
        s.sendall(data)
        return s.makefile("rb").readline()
