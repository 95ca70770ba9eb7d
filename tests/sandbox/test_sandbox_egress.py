"""Egress: the routes an agent gets, and real connections through bwrap, the bridge and the gate."""

from __future__ import annotations

import asyncio
import os
import sys
import tempfile
from pathlib import Path

import pytest

from scaffold.agent.claude import Claude
from scaffold.config import SandboxConfig
from scaffold.sandbox.confinement import Confinement, confine
from scaffold.sandbox.egress import EgressGate, Route, hosts_file, plan_egress
from scaffold.sandbox.settings import resolve_sandbox


def test_model_endpoint_from_the_environment() -> None:
    claude = Claude()
    assert claude.model_host({}) == ("api.anthropic.com", 443)
    assert claude.model_host({"ANTHROPIC_BASE_URL": "http://127.0.0.1:8123"}) == ("127.0.0.1", 8123)
    assert claude.model_host({"ANTHROPIC_BASE_URL": "https://llm.corp.example"}) == (
        "llm.corp.example",
        443,
    )
    assert claude.model_host({"ANTHROPIC_BASE_URL": "not a url"}) == ("api.anthropic.com", 443)


def test_plan_puts_the_model_first_and_names_each_host_at_its_own_address() -> None:
    routes = plan_egress(("api.anthropic.com", 443), ["pypi.org", "pypi.org:80", "localhost:9000"])
    assert [(r.host, r.port, r.inside) for r in routes] == [
        ("api.anthropic.com", 443, "127.0.0.10"),
        ("pypi.org", 443, "127.0.0.11"),
        ("pypi.org", 80, "127.0.0.11"),
        ("localhost", 9000, "127.0.0.1"),
    ]
    assert len({r.socket_name for r in routes}) == 4
    hosts = hosts_file(routes)
    assert "127.0.0.10\tapi.anthropic.com" in hosts
    assert "127.0.0.11\tpypi.org" in hosts
    assert hosts.count("pypi.org") == 1


def test_a_loopback_model_keeps_its_address_and_duplicates_are_dropped() -> None:
    routes = plan_egress(("127.0.0.1", 8123), ["127.0.0.1:8123"])
    assert [(r.inside, r.port) for r in routes] == [("127.0.0.1", 8123)]


async def _echo_server() -> tuple[asyncio.Server, int]:
    async def echo(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        data = await reader.read(100)
        writer.write(b"echo:" + data)
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(echo, "127.0.0.1", 0)
    return server, server.sockets[0].getsockname()[1]


_CLIENT = """
import socket, sys
def talk(host, port):
    try:
        with socket.create_connection((host, port), timeout=5) as s:
            s.sendall(b"hi"); return s.recv(100).decode()
    except OSError as exc:
        return f"refused: {type(exc).__name__}"
print(talk("api.example.test", 443))
print(talk("127.0.0.1", int(sys.argv[1])))
print(talk("127.0.0.1", int(sys.argv[2])))
"""


@pytest.mark.asyncio
async def test_only_the_routes_reach_out(tmp_path: Path) -> None:
    """A named host reaches the server the gate chose; a loopback route reaches the host's
    loopback; any other port of the host's loopback is out of reach."""
    sandbox = resolve_sandbox(SandboxConfig(mode="bwrap"), strict=True)
    allowed, allowed_port = await _echo_server()
    other, other_port = await _echo_server()
    channel = Path(tempfile.mkdtemp(prefix="scaffold-test-"))
    routes = [
        Route("api.example.test", 443, "127.0.0.10", "egress-0.sock", ("127.0.0.1", allowed_port)),
        Route("127.0.0.1", allowed_port, "127.0.0.1", "egress-1.sock"),
    ]
    repo = tmp_path / "repo"
    repo.mkdir()
    c = Confinement(
        repo=repo, cwd=repo, private=tmp_path / "private", channel=channel, routes=routes
    )
    argv, env = confine(
        sandbox,
        c,
        [sys.executable, "-c", _CLIENT, str(allowed_port), str(other_port)],
        dict(os.environ),
    )
    async with allowed, other, EgressGate(channel, routes):
        proc = await asyncio.create_subprocess_exec(
            *argv, env=env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
    assert proc.returncode == 0, err.decode()
    assert out.decode().splitlines() == [
        "echo:hi",
        "echo:hi",
        "refused: ConnectionRefusedError",
    ]
