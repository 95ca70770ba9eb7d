"""What an attacker plants to steal git credentials, and what it would catch.

:class:`Trap` is a listener on 127.0.0.1 that records every byte sent to it (a
redirected fetch would send it the ``Authorization`` header). :func:`evil_script`
writes a program that records its environment (where a token handed to git through
``GIT_CONFIG_*`` would show) into a marker file each time it runs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import socket
import threading
from pathlib import Path

import pytest

_REPLIES = {
    404: b"HTTP/1.1 404 Not Found\r\n",
    401: b'HTTP/1.1 401 Unauthorized\r\nWWW-Authenticate: Basic realm="trap"\r\n',
}


class Trap:
    """A TCP listener that records what it receives.

    It answers every request with ``status`` (404, or 401 to ask for credentials);
    ``answer=False`` never answers (a hung server). :attr:`closed` is set once a
    client that connected has gone away.
    """

    def __init__(self, *, answer: bool = True, status: int = 404) -> None:
        self.answer = answer
        self._reply = _REPLIES[status] + b"Content-Length: 0\r\nConnection: close\r\n\r\n"
        self._data = bytearray()
        self._lock = threading.Lock()
        self.connections = 0
        self.closed = threading.Event()
        self._sock = socket.socket()
        self._sock.bind(("127.0.0.1", 0))
        self._sock.listen(16)
        self.port: int = self._sock.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, name="credtrap", daemon=True)
        self._thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def received(self) -> bytes:
        with self._lock:
            return bytes(self._data)

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self._sock.accept()
            except OSError:
                return
            with self._lock:
                self.connections += 1
            threading.Thread(target=self._handle, args=(conn,), daemon=True).start()

    def _handle(self, conn: socket.socket) -> None:
        request = b""
        with conn:
            while True:
                try:
                    chunk = conn.recv(65536)
                except OSError:
                    break
                if not chunk:
                    break
                request += chunk
                with self._lock:
                    self._data += chunk
                if self.answer and b"\r\n\r\n" in request:
                    conn.sendall(self._reply)
                    break
        self.closed.set()

    def close(self) -> None:
        # shutdown wakes the blocked accept(), so no thread outlives the trap (and no
        # later trap's socket, which may get the same descriptor, is served by it)
        with contextlib.suppress(OSError):
            self._sock.shutdown(socket.SHUT_RDWR)
        self._thread.join(30)
        self._sock.close()

    def __enter__(self) -> Trap:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def evil_script(folder: Path, name: str, *, passthrough: bool = False) -> tuple[Path, Path]:
    """An executable that appends its arguments and environment to a marker file.

    ``passthrough`` makes it copy its input (or the files it is given) to its output,
    as a clean or smudge filter and a textconv program must. Returns (script, marker).
    """
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / f"{name}.sh"
    marker = folder / f"{name}.ran"
    tail = 'exec cat "$@"\n' if passthrough else "exit 0\n"
    script.write_text(f'#!/bin/sh\n{{ echo "ARGS: $*"; env; }} >> "{marker}"\n{tail}')
    script.chmod(0o755)
    return script, marker


def leaks(secrets: tuple[str, ...], *places: Path | bytes) -> list[str]:
    """Which places (files, folders, received bytes) hold one of ``secrets``."""
    found: list[str] = []
    for place in places:
        if isinstance(place, bytes):
            chunks = [("received bytes", place)]
        elif place.is_dir():
            chunks = [(str(p), p.read_bytes()) for p in place.rglob("*") if p.is_file()]
        elif place.is_file():
            chunks = [(str(place), place.read_bytes())]
        else:
            chunks = []
        for where, data in chunks:
            if any(s.encode() in data for s in secrets if s):
                found.append(where)
    return found


def capless() -> list[str]:
    """A prefix that runs a command without root's capabilities (CAP_SYS_PTRACE,
    CAP_SYS_ADMIN, ... would let it read any process), like a same-user process."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.fail("setpriv (util-linux) is needed to run without root's capabilities")
    return [setpriv, "--inh-caps=-all", "--bounding-set=-all"]


# Run by an agent: find `scaffold action ...` among its ancestors, try to read its
# exec-time environment (where GITHUB_TOKEN was), and record that and its own env.
ENVIRON_PROBE = """\
import json, os, sys
from pathlib import Path
def parent(pid):
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("PPid:"):
            return int(line.split()[1])
    return 0
pid, found = os.getppid(), None
while pid > 1:
    argv = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\\0")
    if b"scaffold" in argv and b"action" in argv:
        found = pid
        break
    pid = parent(pid)
result = {"scaffold_pid": found, "own_env": dict(os.environ)}
try:
    result["scaffold_environ"] = Path(f"/proc/{found}/environ").read_bytes().decode(errors="replace")
except OSError as exc:
    result["error"] = type(exc).__name__
try:  # a same-user process that is dumpable: readable (the probe works)
    Path(f"/proc/{os.getppid()}/environ").read_bytes()
    result["agent_readable"] = True
except OSError:
    result["agent_readable"] = False
Path(sys.argv[1]).write_text(json.dumps(result))
"""
