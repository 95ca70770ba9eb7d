"""scaffold.server.run in a child process: drain on SIGTERM, and no delivery lost to kill -9."""

from __future__ import annotations

import http.client
import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import pytest
from webhook_support import SECRET, example, signed_headers

CHILD = """
import asyncio, logging, sys
from pathlib import Path
from scaffold.server.app import create_app
from scaffold.server.logs import configure_json_logging
from scaffold.server.run import serve
from scaffold.server.settings import ServerSettings

out, state, delay, drain = Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4])
configure_json_logging(logging.INFO, extra_secrets=[sys.argv[5]])

async def slow(delivery):
    await asyncio.sleep(delay)
    (out / delivery.id).write_text(delivery.event)

async def on_shutdown(app):
    done = sorted(p.name for p in out.iterdir())
    (out / "on-shutdown").write_text(",".join(done))

settings = ServerSettings(app_id=1, private_key=b"-", webhook_secret=sys.argv[5], state_dir=state, workers=2)
app = create_app(settings, slow)
app.on_shutdown.append(on_shutdown)
serve(app, "127.0.0.1", 0, drain_timeout_s=drain)
"""


@dataclass
class Child:
    proc: subprocess.Popen[str]
    port: int
    lines: list[str]

    def post(self, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, Any]]:
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=30)
        try:
            conn.request("POST", "/webhook", body=body, headers=headers)
            resp = conn.getresponse()
            return resp.status, json.loads(resp.read())
        finally:
            conn.close()

    def finish(self) -> int:
        stderr: IO[str] | None = self.proc.stderr
        assert stderr is not None
        rest = stderr.read()
        self.lines.extend(rest.splitlines())
        return self.proc.wait(timeout=60)


@pytest.fixture
def spawn(tmp_path: Path) -> Iterator[Any]:
    children: list[subprocess.Popen[str]] = []

    def start(out: Path, state: Path, delay: float, drain: float) -> Child:
        out.mkdir(exist_ok=True)
        argv = [sys.executable, "-c", CHILD, str(out), str(state), str(delay), str(drain), SECRET]
        proc = subprocess.Popen(argv, stderr=subprocess.PIPE, text=True, cwd=tmp_path)
        children.append(proc)
        assert proc.stderr is not None
        lines: list[str] = []
        for line in proc.stderr:
            lines.append(line)
            entry = json.loads(line)
            if entry["msg"] == "listening":
                return Child(proc, int(entry["port"]), lines)
        raise AssertionError(f"the server did not start: {''.join(lines)}")

    yield start
    for proc in children:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_sigterm_drains_then_runs_shutdown_hooks_and_exits_0(spawn, tmp_path) -> None:
    out, state = tmp_path / "out", tmp_path / "state"
    child = spawn(out, state, delay=0.4, drain=60)
    body = example("issues/labeled.0.json")
    ids = [f"term-{i}" for i in range(5)]
    for i in ids:
        status, reply = child.post(body, signed_headers(body, delivery=i))
        assert (status, reply["status"]) == (202, "queued")
    child.proc.send_signal(signal.SIGTERM)
    assert child.finish() == 0
    assert sorted(p.name for p in out.iterdir() if p.name != "on-shutdown") == ids
    assert (out / "on-shutdown").read_text() == ",".join(ids)  # the hook ran after the drain
    entries = [json.loads(line) for line in child.lines]
    assert [e["msg"] for e in entries if e["msg"] in ("drained", "stopped")] == [
        "drained",
        "stopped",
    ]
    assert {e["delivery"] for e in entries if e["msg"] == "handled"} == set(ids)
    assert SECRET not in "".join(child.lines)


def test_what_a_short_drain_leaves_is_handled_at_the_next_start(spawn, tmp_path) -> None:
    out, state = tmp_path / "out", tmp_path / "state"
    child = spawn(out, state, delay=3600, drain=0.2)
    body = example("issues/labeled.0.json")
    for i in ("left-1", "left-2", "left-3"):
        assert child.post(body, signed_headers(body, delivery=i))[0] == 202
    child.proc.send_signal(signal.SIGTERM)
    assert child.finish() == 0
    assert sorted(p.name for p in out.iterdir()) == ["on-shutdown"]

    child = spawn(out, state, delay=0, drain=60)
    status, reply = child.post(body, signed_headers(body, delivery="left-2"))
    assert (status, reply["status"]) == (200, "duplicate")
    child.proc.send_signal(signal.SIGTERM)
    assert child.finish() == 0
    assert {"left-1", "left-2", "left-3"} <= {p.name for p in out.iterdir()}


def test_kill_9_loses_no_accepted_delivery(spawn, tmp_path) -> None:
    out, state = tmp_path / "out", tmp_path / "state"
    child = spawn(out, state, delay=3600, drain=60)
    body = example("issues/labeled.0.json")
    ids = [f"killed-{i}" for i in range(4)]
    for i in ids:
        assert child.post(body, signed_headers(body, delivery=i))[0] == 202
    os.kill(child.proc.pid, signal.SIGKILL)
    assert child.proc.wait(timeout=30) == -signal.SIGKILL

    child = spawn(out, state, delay=0, drain=60)
    for i in ids:  # GitHub redelivering them is recognised
        assert child.post(body, signed_headers(body, delivery=i))[1]["status"] == "duplicate"
    child.proc.send_signal(signal.SIGTERM)
    assert child.finish() == 0
    assert set(ids) <= {p.name for p in out.iterdir()}
