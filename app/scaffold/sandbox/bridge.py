"""The first program inside an agent's sandbox: its only way out to the network.

The sandbox has a network namespace of its own, with nothing but a loopback. This
program binds the loopback addresses it is given, each to one unix socket that scaffold
serves outside (``--forward 127.0.0.11:443=/run/scaffold/egress-0.sock``), then runs
the agent and exits with the agent's status. A connection to one of those addresses
reaches exactly one host scaffold chose; anything else has no route.

Standard library only, run as ``python -I -S bridge.py``: it starts before anything of
scaffold or the agent is imported, and writes nothing to stdout (the agent's stream).
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import threading

_CHUNK = 65536


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(_CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        for sock, how in ((dst, socket.SHUT_WR), (src, socket.SHUT_RD)):
            with contextlib.suppress(OSError):
                sock.shutdown(how)


def _serve_one(client: socket.socket, target: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(target)
    except OSError:
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def _accept_loop(listener: socket.socket, target: str) -> None:
    while True:
        try:
            client, _ = listener.accept()
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


def main(argv: list[str]) -> int:
    forwards: list[str] = []
    while argv and argv[0] == "--forward":
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
    for listener, target in listeners:
        threading.Thread(target=_accept_loop, args=(listener, target), daemon=True).start()
    try:
        child = subprocess.Popen(command, close_fds=True)
    except OSError as exc:
        sys.stderr.write(f"scaffold sandbox bridge: cannot start {command[0]!r}: {exc}\n")
        return 127
    for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
        signal.signal(sig, lambda s, _f: child.send_signal(s))
    code = child.wait()
    sys.stderr.flush()
    # Daemon threads may sit in accept(); leave without joining them.
    os._exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    main(sys.argv[1:])
