"""Inside bubblewrap, an agent reaches its own run's HTTP signal endpoint and no other."""

from __future__ import annotations

import asyncio
import json
import os
import sys
from pathlib import Path

import pytest

from scaffold.config import SandboxConfig
from scaffold.roles import Role
from scaffold.runtime.run_channel import RunChannel
from scaffold.sandbox.confinement import Confinement
from scaffold.sandbox.settings import resolve_sandbox
from scaffold.signal_back.records import Binding, read_signals

# Runs inside the sandbox: standard library only, one JSON result per line.
_AGENT = r"""
import json, sys, urllib.error, urllib.request
other_url, other_secret, other_step = sys.argv[1:4]
entry = json.load(open("/run/scaffold/mcp.json"))["mcpServers"]["scaffold"]
url, mine = entry["url"], entry["headers"]["Authorization"]

def post(target, auth, method, params=None):
    body = {"jsonrpc": "2.0", "id": 1, "method": method, "params": params or {}}
    req = urllib.request.Request(target, data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": auth, "Content-Type": "application/json",
                 "Accept": "application/json, text/event-stream"})
    try:
        with urllib.request.urlopen(req, timeout=10) as resp:
            reply = json.loads(resp.read())
            return {"status": resp.status, "error": bool(reply["result"].get("isError"))}
    except urllib.error.HTTPError as exc:
        return {"status": exc.code}
    except OSError as exc:
        return {"status": None, "refused": type(exc).__name__}

def signal(step):
    return {"name": "signal-back",
            "arguments": {"signal": "complete", "stepId": step, "summary": "from inside"}}

print(json.dumps({"url": url}))
init = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}
print(json.dumps(post(url, mine, "initialize", init)))
print(json.dumps(post(url, "Bearer " + other_secret, "tools/call", signal(other_step))))
print(json.dumps(post(url, mine, "tools/call", signal(other_step))))
print(json.dumps(post(other_url, "Bearer " + other_secret, "tools/call", signal(other_step))))
print(json.dumps(post(url, mine, "tools/call", signal("TASK-1"))))
print(json.dumps(sorted(p for p in __import__("os").listdir("/run/scaffold"))))
"""


@pytest.mark.asyncio
async def test_the_agent_reaches_its_own_endpoint_and_not_another_runs(tmp_path: Path) -> None:
    sandbox = resolve_sandbox(SandboxConfig(mode="bwrap"), strict=True)
    repo = tmp_path / "repo"
    repo.mkdir()
    mine = Binding(tmp_path / "signals-1", "TASK-1", Role.CODEWEAVER, "quest-1", repo)
    theirs = Binding(tmp_path / "signals-2", "TASK-2", Role.CODEWEAVER, "quest-1", repo)
    confinement = Confinement(repo=repo, cwd=repo, private=tmp_path / "private")
    env = {"ANTHROPIC_BASE_URL": "http://127.0.0.1:9"}
    unconfined = resolve_sandbox(SandboxConfig(mode="off"), strict=False)
    channel = RunChannel(sandbox, mine, confinement, python=sys.executable, env=env)
    other = RunChannel(unconfined, theirs, confinement, python=sys.executable, env=env)
    async with channel, other:
        their_url, their_secret, _ = other.signal
        argv, run_env = channel.wrap(
            [sys.executable, "-I", "-c", _AGENT, their_url, their_secret, "TASK-2"],
            dict(os.environ),
        )
        proc = await asyncio.create_subprocess_exec(
            *argv, env=run_env, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
        )
        out, err = await asyncio.wait_for(proc.communicate(), 60)
        assert proc.returncode == 0, err.decode()
        signalled = channel.signalled.is_set()
    lines = [json.loads(line) for line in out.decode().splitlines()]
    url, init, foreign_secret, foreign_step, other_run, own, listing = lines
    assert url == {"url": "http://127.0.0.2:8765/mcp"}  # the bridge's address inside
    assert init == {"status": 200, "error": False}
    assert foreign_secret == {"status": 401}  # this socket serves this run only
    assert foreign_step == {"status": 200, "error": True}  # the step binding
    assert other_run["status"] is None  # the other run's loopback port: no route inside
    assert own == {"status": 200, "error": False}
    assert "signal-http.sock" in listing
    assert "signal.sock" not in listing
    assert signalled
    assert [r.step_id for r in read_signals(mine.signal_dir)] == ["TASK-1"]
    assert read_signals(theirs.signal_dir) == []
