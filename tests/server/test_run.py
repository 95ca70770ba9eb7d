"""scaffold.server.run in a child process: drain on SIGTERM, and no delivery lost to kill -9."""

from __future__ import annotations

import asyncio
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

settings = ServerSettings(
    app_id=1, private_key=b"-", webhook_secret=sys.argv[5], state_dir=state, workers=2,
    fsync=sys.argv[6] == "fsync",
)
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

    def start(out: Path, state: Path, delay: float, drain: float, fsync: bool = False) -> Child:
        out.mkdir(exist_ok=True)
        argv = [sys.executable, "-c", CHILD, str(out), str(state), str(delay), str(drain), SECRET]
        argv.append("fsync" if fsync else "-")
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


async def _burst(port: int, body: bytes, ids: list[str], kill_after: int, pid: int) -> set[str]:
    """Post ``ids`` over 16 connections; kill -9 the server once ``kill_after`` are
    acknowledged, with the rest in flight. The ids answered 202."""
    acked: set[str] = set()
    todo = iter(ids)

    async def one_connection() -> None:
        reader = writer = None
        try:
            reader, writer = await asyncio.open_connection("127.0.0.1", port)
            for delivery in todo:
                head = (
                    f"POST /webhook HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: {len(body)}\r\n"
                )
                head += "".join(
                    f"{k}: {v}\r\n" for k, v in signed_headers(body, delivery=delivery).items()
                )
                writer.write(head.encode() + b"\r\n" + body)
                status_line = await reader.readline()
                if not status_line:
                    return
                length = 0
                while (line := await reader.readline()) not in (b"\r\n", b""):
                    if line.lower().startswith(b"content-length:"):
                        length = int(line.split(b":")[1])
                await reader.readexactly(length)
                if status_line.split()[1] == b"202":
                    acked.add(delivery)
                    if len(acked) == kill_after:
                        os.kill(pid, signal.SIGKILL)
        except (ConnectionError, asyncio.IncompleteReadError):
            return
        finally:
            if writer is not None:
                writer.close()

    await asyncio.gather(*(one_connection() for _ in range(16)))
    return acked


@pytest.mark.parametrize("fsync", [False, True], ids=["written", "fsynced"])
def test_kill_9_during_a_burst_loses_no_acknowledged_delivery(spawn, tmp_path, fsync) -> None:
    out, state = tmp_path / "out", tmp_path / "state"
    child = spawn(out, state, delay=3600, drain=60, fsync=fsync)
    body = example("issues/labeled.0.json")
    ids = [f"burst-{i:04d}" for i in range(600)]
    acked = asyncio.run(_burst(child.port, body, ids, kill_after=200, pid=child.proc.pid))
    assert child.proc.wait(timeout=30) == -signal.SIGKILL
    assert 200 <= len(acked) < len(ids)  # killed mid-burst

    child = spawn(out, state, delay=0, drain=60, fsync=fsync)
    for i in sorted(acked)[:: max(1, len(acked) // 20)]:  # redeliveries are recognised
        assert child.post(body, signed_headers(body, delivery=i))[1]["status"] == "duplicate"
    child.proc.send_signal(signal.SIGTERM)
    assert child.finish() == 0
    assert acked <= {p.name for p in out.iterdir()}  # every acknowledged one was handled
