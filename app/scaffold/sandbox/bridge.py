"""The first program inside an agent's sandbox: its only way out to the network.

The sandbox has a network namespace of its own, with nothing but a loopback. This
program binds the loopback addresses it is given, each to one unix socket that scaffold
serves outside (``--forward 127.0.0.11:443=/run/scaffold/egress-0.sock``), then runs
the agent and exits with the agent's status. A connection to one of those addresses
reaches exactly one host scaffold chose; anything else has no route.

Every listener is bound and listening before the agent starts, so the agent can never
find an address not yet there: a connection made before the accept thread runs waits
in the listen queue. The sockets are close-on-exec, so the agent inherits none of them.

Standard library only, run as ``python -I -S bridge.py``: it starts before anything of
scaffold or the agent is imported, and writes nothing to stdout (the agent's stream).
The agent is started the way ``subprocess.Popen(argv, close_fds=True)`` does it:
``PATH`` searched, signals Python ignores (SIGPIPE, SIGXFSZ) back to their defaults,
descriptors above 2 closed.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import sys
import threading

_CHUNK = 65536
# Forwarded to the agent, and SIGCHLD: it has exited.
_WATCHED = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP, signal.SIGCHLD}


def _pump(src: socket.socket, dst: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while data := src.recv(_CHUNK):
            dst.sendall(data)
    with contextlib.suppress(OSError):
        dst.shutdown(socket.SHUT_WR)
    with contextlib.suppress(OSError):
        src.shutdown(socket.SHUT_RD)


def _serve_one(client: socket.socket, target: str) -> None:
    with client, socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as upstream:
        try:
            upstream.connect(target)
        except OSError:
            return
        back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
        back.start()
        _pump(client, upstream)
        back.join()


def _accept_loop(listener: socket.socket, target: str) -> None:
    while True:
        try:
            client, _ = listener.accept()  # close-on-exec: not inherited
        except OSError:
            return
        threading.Thread(target=_serve_one, args=(client, target), daemon=True).start()


def _listen(spec: str) -> tuple[socket.socket, str]:
    address, _, target = spec.partition("=")
    host, _, port = address.rpartition(":")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    listener = socket.socket(family, socket.SOCK_STREAM)
    listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    listener.bind((host.strip("[]"), int(port)))
    listener.listen(64)
    return listener, target


def _exec_child(command: list[str]) -> None:
    """In the forked child (no other thread exists): become the agent, or exit 127."""
    try:
        for sig in (signal.SIGPIPE, signal.SIGXFSZ):
            signal.signal(sig, signal.SIG_DFL)
        signal.pthread_sigmask(signal.SIG_UNBLOCK, _WATCHED)
        os.closerange(3, 1 << 20)
        os.execvp(command[0], command)  # noqa: S606 (the agent's own argv)
    except OSError as exc:
        sys.stderr.write(f"scaffold sandbox bridge: cannot start {command[0]!r}: {exc}\n")
        sys.stderr.flush()
    finally:
        os._exit(127)


def _forward_until_exit(pid: int) -> int:
    """Pass SIGTERM, SIGINT and SIGHUP on to the agent until it exits; its wait status."""
    while True:
        signum = signal.sigwait(_WATCHED)
        if signum != signal.SIGCHLD:
            with contextlib.suppress(OSError):
                os.kill(pid, signum)
            continue
        done, status = os.waitpid(pid, os.WNOHANG)
        if done == pid:
            return int(status)


def main(argv: list[str]) -> int:
    forwards: list[str] = []
    while len(argv) >= 2 and argv[0] == "--forward":
        forwards.append(argv[1])
        argv = argv[2:]
    if not argv or argv[0] != "--" or len(argv) < 2:
        sys.stderr.write("scaffold sandbox bridge: usage: [--forward ADDR:PORT=SOCK]... -- ARGV\n")
        return 2
    command = argv[1:]
    try:
        listeners = [_listen(spec) for spec in forwards]
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"scaffold sandbox bridge: cannot listen: {exc}\n")
        return 126
    sys.stderr.flush()
    # Blocked from before the fork, and taken one by one: a signal sent the moment the
    # agent starts is forwarded, never lost (a handler installed after the fork missed
    # it, or ran only once the agent had exited).
    signal.pthread_sigmask(signal.SIG_BLOCK, _WATCHED)
    pid = os.fork()  # before any thread starts: the child runs no other thread's state
    if pid == 0:
        _exec_child(command)
    for listener, target in listeners:  # the threads inherit the blocked signals
        threading.Thread(target=_accept_loop, args=(listener, target), daemon=True).start()
    status = _forward_until_exit(pid)
    code = os.waitstatus_to_exitcode(status)
    sys.stderr.flush()
    # Accept threads may sit in accept(); leave without waiting for them.
    os._exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
