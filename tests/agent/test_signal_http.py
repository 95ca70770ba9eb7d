"""signal-back over MCP Streamable HTTP, served by scaffold: real HTTP on loopback and unix."""

from __future__ import annotations

import asyncio
import json
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from scaffold.agent.mcp_http_client import McpHttpClient, McpHttpError
from scaffold.agent.signal_http import (
    MAX_BODY_BYTES,
    MAX_SESSIONS,
    SignalHttpEndpoint,
    http_mcp_config,
)
from scaffold.agent.signal_server import Binding, read_signals
from scaffold.roles import Role

COMPLETE = {"signal": "complete", "stepId": "TASK-3", "summary": "done"}


def _binding(tmp_path: Path, step: str = "TASK-3", role: Role = Role.CODEWEAVER) -> Binding:
    return Binding(tmp_path / f"signals-{step}", step, role, "quest-1", tmp_path)


def _call(arguments: dict[str, Any], msg_id: int = 1, name: str = "signal-back") -> dict[str, Any]:
    params = {"name": name, "arguments": arguments}
    return {"jsonrpc": "2.0", "id": msg_id, "method": "tools/call", "params": params}


class Peer:
    """A plain HTTP client of one endpoint (aiohttp's client: real sockets, no MCP SDK)."""

    def __init__(self, session: aiohttp.ClientSession, url: str, secret: str) -> None:
        self.session = session
        self.url = url
        self.secret = secret

    async def post(
        self, body: Any, *, secret: str | None = None, raw: bytes | None = None, **headers: str
    ) -> tuple[int, dict[str, str], Any]:
        hdrs = {"Authorization": f"Bearer {secret or self.secret}"}
        hdrs["Content-Type"] = "application/json"
        hdrs.update(headers)
        data = raw if raw is not None else json.dumps(body).encode()
        async with self.session.post(self.url, data=data, headers=hdrs) as resp:
            text = await resp.read()
            parsed = json.loads(text) if text and resp.content_type == "application/json" else None
            return resp.status, dict(resp.headers), parsed


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


async def test_the_json_response_transport_from_initialize_to_delete(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    async with SignalHttpEndpoint(_binding(tmp_path)) as ep:
        peer = Peer(http, ep.url, ep.secret)
        init = {
            "jsonrpc": "2.0",
            "id": 0,
            "method": "initialize",
            "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {}},
        }
        status, headers, reply = await peer.post(init)
        assert status == 200
        assert headers["Content-Type"].startswith("application/json")
        session = headers["Mcp-Session-Id"]
        assert reply["result"]["protocolVersion"] == "2025-06-18"
        assert reply["result"]["serverInfo"]["name"] == "scaffold"
        assert "tools" in reply["result"]["capabilities"]
        sess = {"Mcp-Session-Id": session}
        note = {"jsonrpc": "2.0", "method": "notifications/initialized"}
        assert (await peer.post(note, **sess))[0] == 202
        status, _, reply = await peer.post({"jsonrpc": "2.0", "id": 1, "method": "ping"}, **sess)
        assert (status, reply["result"]) == (200, {})
        listed = await peer.post({"jsonrpc": "2.0", "id": "l", "method": "tools/list"}, **sess)
        assert [t["name"] for t in listed[2]["result"]["tools"]] == ["signal-back"]
        auth = {"Authorization": f"Bearer {ep.secret}", **sess}
        async with http.get(ep.url, headers=auth) as resp:
            assert resp.status == 405  # no server-sent stream: JSON responses only
        async with http.delete(ep.url, headers=auth) as resp:
            assert resp.status == 200
        assert (await peer.post({"jsonrpc": "2.0", "id": 2, "method": "ping"}, **sess))[0] == 404
        # A version the server does not know is answered with its newest.
        init["params"] = {"protocolVersion": "1999-01-01"}
        assert (await peer.post(init))[2]["result"]["protocolVersion"] == "2025-11-25"


async def test_sessions_are_bounded_the_oldest_one_goes(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    async with SignalHttpEndpoint(_binding(tmp_path)) as ep:
        peer = Peer(http, ep.url, ep.secret)
        init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {}}
        sessions = [(await peer.post(init))[1]["Mcp-Session-Id"] for _ in range(MAX_SESSIONS + 1)]
        ping = {"jsonrpc": "2.0", "id": 1, "method": "ping"}
        assert (await peer.post(ping, **{"Mcp-Session-Id": sessions[0]}))[0] == 404
        assert (await peer.post(ping, **{"Mcp-Session-Id": sessions[-1]}))[0] == 200
        assert (await peer.post(ping, **{"Mcp-Session-Id": sessions[1]}))[0] == 200


async def test_a_signal_is_durable_before_the_answer_and_a_retry_writes_nothing(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    binding = _binding(tmp_path)
    async with SignalHttpEndpoint(binding) as ep:
        peer = Peer(http, ep.url, ep.secret)
        status, _, reply = await peer.post(_call(COMPLETE))
        assert status == 200
        assert reply["result"]["isError"] is False
        # On disk as soon as the agent hears back.
        [record] = read_signals(binding.signal_dir)
        assert record.step_id == "TASK-3"
        assert ep.signalled.is_set()
        # The answer was lost, the agent asks again (another JSON-RPC id): same answer,
        # one signal.
        again = await peer.post(_call(COMPLETE, msg_id=2))
        assert again[2]["result"] == reply["result"]
        assert len(read_signals(binding.signal_dir)) == 1
        # A different signal is a new one.
        other = {"signal": "partially-complete", "stepId": "TASK-3"}
        other |= {"progress": "half", "continuationPoint": "the rest"}
        assert (await peer.post(_call(other, msg_id=3)))[2]["result"]["isError"] is False
        assert [r.signal.signal for r in read_signals(binding.signal_dir)] == [
            "complete",
            "partially-complete",
        ]


async def test_forged_secrets_another_runs_secret_and_another_step_are_refused(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    mine, theirs = _binding(tmp_path, "TASK-3"), _binding(tmp_path, "TASK-4")
    async with SignalHttpEndpoint(mine) as ep, SignalHttpEndpoint(theirs) as other:
        peer = Peer(http, ep.url, ep.secret)
        assert (await peer.post(_call(COMPLETE), secret="forged"))[0] == 401
        assert (await peer.post(_call(COMPLETE), secret=other.secret))[0] == 401
        async with http.post(ep.url, json=_call(COMPLETE)) as resp:  # no secret at all
            assert resp.status == 401
        # The right secret, a signal for another step: the existing binding check.
        forged = dict(COMPLETE, stepId="TASK-4")
        _, _, reply = await peer.post(_call(forged))
        assert reply["result"]["isError"] is True
        assert "not your step" in reply["result"]["content"][0]["text"]
        assert not ep.signalled.is_set()
    assert read_signals(mine.signal_dir) == []
    assert read_signals(theirs.signal_dir) == []


async def test_a_replay_after_the_run_ended_is_refused(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    binding = _binding(tmp_path)
    async with SignalHttpEndpoint(binding) as ep:
        url, secret = ep.url, ep.secret
    with pytest.raises(aiohttp.ClientConnectionError):
        await Peer(http, url, secret).post(_call(COMPLETE))
    # The next run's endpoint (maybe on the same port) does not know the old secret.
    async with SignalHttpEndpoint(binding) as later:
        assert (await Peer(http, later.url, secret).post(_call(COMPLETE)))[0] == 401
    assert read_signals(binding.signal_dir) == []


async def test_malformed_requests_get_json_rpc_errors_and_the_endpoint_keeps_serving(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    binding = _binding(tmp_path)
    async with SignalHttpEndpoint(binding) as ep:
        peer = Peer(http, ep.url, ep.secret)

        async def code(body: Any = None, raw: bytes | None = None) -> tuple[int, int | None]:
            status, _, reply = await peer.post(body, raw=raw)
            return status, (reply or {}).get("error", {}).get("code")

        assert await code(raw=b"{not json") == (400, -32700)
        assert await code([_call(COMPLETE)]) == (400, -32600)  # no batches
        assert await code({"id": 1, "method": "ping"}) == (400, -32600)  # no "jsonrpc"
        assert await code({"jsonrpc": "2.0", "id": 1, "method": 5}) == (400, -32600)
        assert await code({"jsonrpc": "2.0", "id": [1], "method": "ping"}) == (400, -32600)
        assert await code({"jsonrpc": "2.0", "id": 1, "method": "resources/list"}) == (200, -32601)
        assert await code({"jsonrpc": "2.0", "id": 1, "method": "ping", "params": 3}) == (
            200,
            -32602,
        )
        no_name = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {}}
        assert await code(no_name) == (200, -32602)
        bad_args = {"jsonrpc": "2.0", "id": 1, "method": "tools/call"}
        bad_args["params"] = {"name": "signal-back", "arguments": ["x"]}
        assert await code(bad_args) == (200, -32602)
        # A bad payload is a tool error the agent can read, not a protocol error.
        _, _, reply = await peer.post(_call({"signal": "complete", "stepId": "TASK-3"}))
        assert reply["result"]["isError"] is True
        status, _, _ = await peer.post(None, raw=b"{}", **{"Content-Type": "text/plain"})
        assert status == 415
        async with http.post(
            ep.url.replace("/mcp", "/other"), headers={"Authorization": f"Bearer {ep.secret}"}
        ) as resp:
            assert resp.status == 404
        # Still serving, nothing written.
        assert (await code({"jsonrpc": "2.0", "id": 9, "method": "ping"})) == (200, None)
    assert read_signals(binding.signal_dir) == []


async def test_an_oversize_body_is_refused_with_or_without_a_length(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    binding = _binding(tmp_path)
    async with SignalHttpEndpoint(binding) as ep:
        peer = Peer(http, ep.url, ep.secret)
        big = dict(COMPLETE, summary="x" * (MAX_BODY_BYTES + 10))
        assert (await peer.post(_call(big)))[0] == 413

        async def chunks() -> AsyncIterator[bytes]:
            yield json.dumps(_call(big)).encode()

        headers = {"Authorization": f"Bearer {ep.secret}", "Content-Type": "application/json"}
        async with http.post(ep.url, data=chunks(), headers=headers) as resp:
            assert resp.status == 413  # chunked: no Content-Length to refuse it early
        assert (await peer.post(_call(COMPLETE)))[0] == 200
    assert len(read_signals(binding.signal_dir)) == 1


async def test_on_a_unix_socket_the_endpoint_serves_its_own_run_only(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    folder = Path(tempfile.mkdtemp(prefix="sig-"))  # short: unix socket paths are limited
    mine, theirs = _binding(tmp_path, "TASK-3"), _binding(tmp_path, "TASK-4")
    async with (
        SignalHttpEndpoint(mine, unix_path=folder / "a.sock") as ep,
        SignalHttpEndpoint(theirs) as other,
    ):
        assert ep.port is None
        connector = aiohttp.UnixConnector(path=str(folder / "a.sock"))
        async with aiohttp.ClientSession(connector=connector) as over_unix:
            peer = Peer(over_unix, "http://127.0.0.2:8765/mcp", ep.secret)
            assert (await peer.post(_call(COMPLETE), secret=other.secret))[0] == 401
            theirs_payload = dict(COMPLETE, stepId="TASK-4")
            reply = (await peer.post(_call(theirs_payload, msg_id=2), secret=ep.secret))[2]
            assert reply["result"]["isError"] is True
            assert (await peer.post(_call(COMPLETE, msg_id=3)))[0] == 200
    assert [r.step_id for r in read_signals(mine.signal_dir)] == ["TASK-3"]
    assert read_signals(theirs.signal_dir) == []


async def test_the_plain_client_the_scripted_agent_uses(tmp_path: Path) -> None:
    binding = _binding(tmp_path, "PLAN", Role.PATHSEEKER)
    async with SignalHttpEndpoint(binding) as ep:
        entry = http_mcp_config(ep.url, ep.secret)["mcpServers"]["scaffold"]
        assert entry["type"] == "http"
        client = McpHttpClient(entry["url"], entry["headers"])
        result = await asyncio.to_thread(client.initialize)
        assert result["serverInfo"]["name"] == "scaffold"
        names = [t["name"] for t in await asyncio.to_thread(client.list_tools)]
        assert names == ["signal-back", "create-tasks"]
        payload = {"signal": "complete", "stepId": "PLAN", "summary": "planned"}
        text, is_error = await asyncio.to_thread(client.call_tool, "signal-back", payload)
        assert not is_error, text
        await asyncio.to_thread(client.close)
        with pytest.raises(McpHttpError) as refused:
            await asyncio.to_thread(McpHttpClient(ep.url, {}).initialize)
        assert refused.value.status == 401
