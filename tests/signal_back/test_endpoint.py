"""signal-back over MCP Streamable HTTP, served by scaffold: real HTTP on loopback and unix."""

from __future__ import annotations

import json
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from mcp.shared.exceptions import MCPError

from scaffold.roles import Role
from scaffold.signal_back import mcp_config
from scaffold.signal_back.client import call_tool, connect
from scaffold.signal_back.endpoint import MAX_BODY_BYTES, SignalEndpoint
from scaffold.signal_back.records import Binding, read_signals

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
    ) -> tuple[int, Any]:
        hdrs = {"Authorization": f"Bearer {secret or self.secret}"}
        hdrs["Content-Type"] = "application/json"
        hdrs["Accept"] = "application/json, text/event-stream"
        hdrs.update(headers)
        data = raw if raw is not None else json.dumps(body).encode()
        async with self.session.post(self.url, data=data, headers=hdrs) as resp:
            text = await resp.read()
            parsed = json.loads(text) if text and resp.content_type == "application/json" else None
            return resp.status, parsed


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession() as session:
        yield session


Served = tuple[Binding, SignalEndpoint, Peer]


@pytest.fixture
async def served(tmp_path: Path, http: aiohttp.ClientSession) -> AsyncIterator[Served]:
    """One Codeweaver run's endpoint for TASK-3, and a plain HTTP peer holding its secret."""
    binding = _binding(tmp_path)
    async with SignalEndpoint(binding) as ep:
        yield binding, ep, Peer(http, ep.url, ep.secret)


async def test_the_sdk_client_lists_the_roles_tools_and_signals(tmp_path: Path) -> None:
    binding = _binding(tmp_path, "PLAN", Role.PATHSEEKER)
    async with SignalEndpoint(binding) as ep:
        entry = mcp_config(ep.url, ep.secret)["mcpServers"]["scaffold"]
        assert entry["type"] == "http"
        async with connect(entry) as client:
            assert client.server_info is not None
            assert client.server_info.name == "scaffold"
            names = [t.name for t in (await client.list_tools()).tools]
            assert names == ["signal-back", "create-tasks"]
            payload = {"signal": "complete", "stepId": "PLAN", "summary": "planned"}
            text, is_error = await call_tool(client, "signal-back", payload)
            assert not is_error, text
        with pytest.raises(BaseExceptionGroup) as refused:  # no secret: refused
            async with connect({"url": ep.url}):
                pass
        assert refused.group_contains(MCPError, match="unauthorized")
    assert [r.signal.signal for r in read_signals(binding.signal_dir)] == ["complete"]


async def test_a_signal_is_durable_before_the_answer_and_a_retry_writes_nothing(
    served: Served,
) -> None:
    binding, ep, peer = served
    status, reply = await peer.post(_call(COMPLETE))
    assert status == 200
    assert reply["result"]["isError"] is False
    # On disk as soon as the agent hears back.
    [record] = read_signals(binding.signal_dir)
    assert record.step_id == "TASK-3"
    assert ep.signalled.is_set()
    # The answer was lost, the agent asks again (another JSON-RPC id): same answer,
    # one signal.
    again = await peer.post(_call(COMPLETE, msg_id=2))
    assert again[1]["result"] == reply["result"]
    assert len(read_signals(binding.signal_dir)) == 1
    # A different signal is a new one.
    other = {"signal": "partially-complete", "stepId": "TASK-3"}
    other |= {"progress": "half", "continuationPoint": "the rest"}
    assert (await peer.post(_call(other, msg_id=3)))[1]["result"]["isError"] is False
    assert [r.signal.signal for r in read_signals(binding.signal_dir)] == [
        "complete",
        "partially-complete",
    ]


async def test_forged_secrets_another_runs_secret_and_another_step_are_refused(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    mine, theirs = _binding(tmp_path, "TASK-3"), _binding(tmp_path, "TASK-4")
    async with SignalEndpoint(mine) as ep, SignalEndpoint(theirs) as other:
        peer = Peer(http, ep.url, ep.secret)
        assert (await peer.post(_call(COMPLETE), secret="forged"))[0] == 401
        assert (await peer.post(_call(COMPLETE), secret=other.secret))[0] == 401
        async with http.post(ep.url, json=_call(COMPLETE)) as resp:  # no secret at all
            assert resp.status == 401
        # The right secret, a signal for another step: the binding check.
        forged = dict(COMPLETE, stepId="TASK-4")
        _, reply = await peer.post(_call(forged))
        assert reply["result"]["isError"] is True
        assert "not your step" in reply["result"]["content"][0]["text"]
        assert not ep.signalled.is_set()
    assert read_signals(mine.signal_dir) == []
    assert read_signals(theirs.signal_dir) == []


async def test_a_replay_after_the_run_ended_is_refused(
    tmp_path: Path, http: aiohttp.ClientSession
) -> None:
    binding = _binding(tmp_path)
    async with SignalEndpoint(binding) as ep:
        url, secret = ep.url, ep.secret
    with pytest.raises(aiohttp.ClientConnectionError):
        await Peer(http, url, secret).post(_call(COMPLETE))
    # The next run's endpoint (maybe on the same port) does not know the old secret.
    async with SignalEndpoint(binding) as later:
        assert (await Peer(http, later.url, secret).post(_call(COMPLETE)))[0] == 401
    assert read_signals(binding.signal_dir) == []


async def test_malformed_requests_are_refused_and_the_endpoint_keeps_serving(
    served: Served,
) -> None:
    binding, ep, peer = served

    async def code(body: Any = None, raw: bytes | None = None) -> tuple[int, int | None]:
        status, reply = await peer.post(body, raw=raw)
        return status, (reply or {}).get("error", {}).get("code")

    assert await code(raw=b"{not json") == (400, -32700)
    assert await code({"id": 1, "method": "ping"}) == (400, -32602)  # no "jsonrpc"
    assert await code({"jsonrpc": "2.0", "id": 1, "method": "resources/list"}) == (200, -32601)
    bad_args = _call({})
    bad_args["params"]["arguments"] = ["x"]
    assert await code(bad_args) == (200, -32602)
    # A bad payload is a tool error the agent can read, not a protocol error.
    _, reply = await peer.post(_call({"signal": "complete", "stepId": "TASK-3"}))
    assert reply["result"]["isError"] is True
    assert "summary" in reply["result"]["content"][0]["text"]
    _, reply = await peer.post(_call(COMPLETE, name="create-tasks"))
    assert reply["result"]["isError"] is True
    assert "only for PathSeeker" in reply["result"]["content"][0]["text"]
    async with peer.session.post(
        ep.url.replace("/mcp", "/other"), headers={"Authorization": f"Bearer {ep.secret}"}
    ) as resp:
        assert resp.status == 404
    # Still serving, nothing written.
    ping = {"jsonrpc": "2.0", "id": 9, "method": "ping"}
    assert await peer.post(ping) == (200, {"jsonrpc": "2.0", "id": 9, "result": {}})
    assert read_signals(binding.signal_dir) == []


async def test_an_oversize_body_is_refused_with_or_without_a_length(served: Served) -> None:
    binding, ep, peer = served
    big = dict(COMPLETE, summary="x" * (MAX_BODY_BYTES + 10))
    assert (await peer.post(_call(big)))[0] == 413

    async def chunks() -> AsyncIterator[bytes]:
        yield json.dumps(_call(big)).encode()

    headers = {
        "Authorization": f"Bearer {ep.secret}",
        "Content-Type": "application/json",
        "Accept": "application/json, text/event-stream",
    }
    async with peer.session.post(ep.url, data=chunks(), headers=headers) as resp:
        assert resp.status == 413  # chunked: no Content-Length to refuse it early
    assert (await peer.post(_call(COMPLETE)))[0] == 200
    assert len(read_signals(binding.signal_dir)) == 1


async def test_on_a_unix_socket_the_endpoint_serves_its_own_run_only(tmp_path: Path) -> None:
    folder = Path(tempfile.mkdtemp(prefix="sig-"))  # short: unix socket paths are limited
    mine, theirs = _binding(tmp_path, "TASK-3"), _binding(tmp_path, "TASK-4")
    async with (
        SignalEndpoint(mine, unix_path=folder / "a.sock") as ep,
        SignalEndpoint(theirs) as other,
    ):
        assert ep.port is None
        connector = aiohttp.UnixConnector(path=str(folder / "a.sock"))
        async with aiohttp.ClientSession(connector=connector) as over_unix:
            peer = Peer(over_unix, "http://127.0.0.2:8765/mcp", ep.secret)
            assert (await peer.post(_call(COMPLETE), secret=other.secret))[0] == 401
            theirs_payload = dict(COMPLETE, stepId="TASK-4")
            reply = (await peer.post(_call(theirs_payload, msg_id=2), secret=ep.secret))[1]
            assert reply["result"]["isError"] is True
            assert (await peer.post(_call(COMPLETE, msg_id=3)))[0] == 200
    assert [r.step_id for r in read_signals(mine.signal_dir)] == ["TASK-3"]
    assert read_signals(theirs.signal_dir) == []
