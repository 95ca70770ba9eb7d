"""The sandbox bridge, run directly (no bwrap): what it does before and around the agent.

It must do what ``subprocess.Popen`` would: status passed through, signals forwarded,
``PATH`` searched, no descriptor inherited, and every listener up before the agent runs.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from scaffold.sandbox.confinement import BRIDGE


def bridge(*argv: str, forwards: tuple[str, ...] = ()) -> list[str]:
    opts = [part for spec in forwards for part in ("--forward", spec)]
    return [sys.executable, "-I", "-S", str(BRIDGE), *opts, "--", *argv]


class Started:
    """The bridges a test starts, each in a session of its own: when the test ends,
    however it ends, each session is killed whole (the bridge and any agent it left)."""

    def __init__(self) -> None:
        self.procs: list[subprocess.Popen[Any]] = []

    def start(self, argv: list[str], **kwargs: Any) -> subprocess.Popen[Any]:
        proc = subprocess.Popen(argv, start_new_session=True, **kwargs)
        self.procs.append(proc)
        return proc

    def run(self, argv: list[str]) -> subprocess.CompletedProcess[str]:
        proc = self.start(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        out, err = proc.communicate()
        return subprocess.CompletedProcess(argv, proc.returncode, out, err)

    def kill_all(self) -> None:
        for proc in self.procs:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            for pipe in (proc.stdin, proc.stdout, proc.stderr):
                if pipe is not None:
                    pipe.close()


@pytest.fixture
def started() -> Iterator[Started]:
    procs = Started()
    yield procs  # what follows runs however the test ends
    procs.kill_all()


@pytest.mark.parametrize(("script", "code"), [("exit 3", 3), ("kill -TERM $$", 128 + 15)])
def test_the_agents_status_is_the_bridges(started: Started, script: str, code: int) -> None:
    assert started.run(bridge("sh", "-c", script)).returncode == code


def test_the_agent_is_found_on_path_or_reported_missing(started: Started) -> None:
    ok = started.run(bridge("echo", "hi"))
    assert (ok.returncode, ok.stdout) == (0, "hi\n")
    missing = started.run(bridge("no-such-agent-program"))
    assert missing.returncode == 127
    assert "cannot start 'no-such-agent-program'" in missing.stderr
    assert missing.stdout == ""


def test_a_bridge_that_cannot_listen_or_is_misused_fails_without_starting_the_agent(
    started: Started, tmp_path: Path
) -> None:
    marker = tmp_path / "ran"
    argv = ("touch", str(marker))
    bad = started.run(bridge(*argv, forwards=("127.0.0.1:notaport=/x.sock",)))
    assert bad.returncode == 126
    usage = [sys.executable, "-I", "-S", str(BRIDGE), "touch", str(marker)]
    assert started.run(usage).returncode == 2
    assert not marker.exists()


def test_sigterm_reaches_the_agent_and_sigpipe_is_default_again(started: Started) -> None:
    # Signals the test runner ignores (SIGINT and SIGQUIT, under a shell's ``&``) stay
    # ignored, as Popen leaves them: only the two Python ignores are checked.
    script = 'trap "exit 7" TERM; grep SigIgn: /proc/$$/status; while :; do sleep 0.05; done'
    proc = started.start(bridge("sh", "-c", script), stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    ignored = int(proc.stdout.readline().split()[1], 16)
    for python_ignores in (signal.SIGPIPE, signal.SIGXFSZ):
        assert not ignored & 1 << (python_ignores - 1)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=60) == 7


def test_listeners_are_up_before_the_agent_and_not_inherited(
    started: Started, tmp_path: Path
) -> None:
    """The agent connects on its first line, without retrying, and gets through to the
    unix socket; it holds no socket of the bridge's."""
    upstream = tmp_path / "up.sock"
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(upstream))
    server.listen()

    def echo_once() -> None:
        conn, _ = server.accept()
        with conn:
            conn.sendall(b"echo:" + conn.recv(100))

    threading.Thread(target=echo_once, daemon=True).start()
    probe = socket.socket()
    probe.bind(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()
    agent = (
        "import os, socket\n"
        f"s = socket.create_connection(('127.0.0.1', {port}))\n"
        "s.sendall(b'hello'); print(s.recv(100).decode()); s.close()\n"
        "names = os.listdir('/proc/self/fd')  # its own descriptor is gone once listed\n"
        "fds = [os.readlink('/proc/self/fd/' + f) for f in names if os.path.lexists("
        "'/proc/self/fd/' + f)]\n"
        "print(sum(1 for f in fds if f.startswith('socket:')))\n"
    )
    out = started.run(
        bridge(sys.executable, "-c", agent, forwards=(f"127.0.0.1:{port}={upstream}",))
    )
    server.close()
    assert out.returncode == 0, out.stderr
    assert out.stdout.split("\n")[:2] == ["echo:hello", "0"]
    assert os.path.exists(upstream)
