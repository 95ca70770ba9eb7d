"""The first program inside an agent's sandbox: its only way out to the network.

The sandbox has a network namespace of its own, with nothing but a loopback. This
program binds the loopback addresses it is given, each to one unix socket that scaffold
serves outside (``--forward 127.0.0.11:443=/run/scaffold/egress-0.sock``), then runs
the agent and exits with the agent's status. A connection to one of those addresses
reaches exactly one host scaffold chose; anything else has no route.

Every listener is bound and listening before the agent starts, so the agent can never
find an address not yet there: a connection made before the accept thread runs waits
in the listen queue. The sockets are close-on-exec, so the agent inherits none of them.

With ``--gate FD`` the agent starts only once scaffold writes a byte to that pipe: the
sandbox is made while scaffold still commits the previous agent's work, and the agent
runs once the commit is done. End of file instead of a byte (scaffold withdrew the
start) exits 125 without running anything.

Standard library only, run as ``python -I -S bridge.py``: it starts before anything of
scaffold or the agent is imported, and writes nothing to stdout (the agent's stream).
It sits on the hand-off path (every agent start goes through it), so it imports only
modules built into the interpreter (``_socket``, ``_thread``, ``_signal``, ``posix``):
``socket``, ``threading``, ``signal`` and ``subprocess`` cost some 20 ms of imports per
agent start, twice a bare interpreter's start-up. The agent is started the way
``subprocess.Popen(argv, close_fds=True)`` does it: ``PATH`` searched, signals Python
ignores (SIGPIPE, SIGXFSZ) back to their defaults, descriptors above 2 closed.
"""

from __future__ import annotations

import _signal  # type: ignore[import-not-found]  # built in, no stubs
import _socket
import _thread
import posix
import sys

_CHUNK = 65536
# Forwarded to the agent, and SIGCHLD: it has exited.
_WATCHED = {_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP, _signal.SIGCHLD}


def _quietly(call: object, *args: object) -> None:
    """``call(*args)``, an OSError ignored (``contextlib`` is one import too many)."""
    try:  # noqa: SIM105
        call(*args)  # type: ignore[operator]
    except OSError:
        pass


def _pump(src: _socket.socket, dst: _socket.socket) -> None:
    try:
        while True:
            data = src.recv(_CHUNK)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        _quietly(dst.shutdown, _socket.SHUT_WR)
        _quietly(src.shutdown, _socket.SHUT_RD)


def _serve_one(client: _socket.socket, target: str) -> None:
    upstream = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        upstream.connect(target)
    except OSError:
        _quietly(client.close)
        _quietly(upstream.close)
        return
    back_done = _thread.allocate_lock()
    back_done.acquire()

    def back() -> None:
        try:
            _pump(upstream, client)
        finally:
            back_done.release()

    _thread.start_new_thread(back, ())
    _pump(client, upstream)
    back_done.acquire()
    _quietly(client.close)
    _quietly(upstream.close)


def _accept_loop(listener: _socket.socket, target: str) -> None:
    while True:
        try:
            fd, _ = listener._accept()  # type: ignore[attr-defined]
        except OSError:
            return
        client = _socket.socket(fileno=fd)  # accept4(SOCK_CLOEXEC): not inherited
        _thread.start_new_thread(_serve_one, (client, target))


def _listen(spec: str) -> tuple[_socket.socket, str]:
    address, _, target = spec.partition("=")
    host, _, port = address.rpartition(":")
    family = _socket.AF_INET6 if ":" in host else _socket.AF_INET
    listener = _socket.socket(family, _socket.SOCK_STREAM)
    listener.setsockopt(_socket.SOL_SOCKET, _socket.SO_REUSEADDR, 1)
    listener.bind((host.strip("[]"), int(port)))
    listener.listen(64)
    return listener, target


def _candidates(program: str) -> list[str]:
    """Where ``execvp`` would look for ``program`` (``os.get_exec_path`` without ``os``)."""
    if "/" in program:
        return [program]
    path = posix.environ.get(b"PATH", b"/bin:/usr/bin").decode("utf-8", "surrogateescape")
    return [f"{d or '.'}/{program}" for d in path.split(":")]


def _exec_child(command: list[str]) -> None:
    """In the forked child (no other thread exists): become the agent, or exit 127."""
    try:
        for sig in (_signal.SIGPIPE, _signal.SIGXFSZ):
            _signal.signal(sig, _signal.SIG_DFL)
        _signal.pthread_sigmask(_signal.SIG_UNBLOCK, _WATCHED)
        posix.closerange(3, 1 << 20)
        error: OSError | None = None
        for candidate in _candidates(command[0]):
            try:
                posix.execv(candidate, command)
            except OSError as exc:  # ENOENT: next directory; anything else is remembered
                if error is None or exc.errno != 2:
                    error = exc
        sys.stderr.write(f"scaffold sandbox bridge: cannot start {command[0]!r}: {error}\n")
        sys.stderr.flush()
    finally:
        posix._exit(127)


def _wait_for_gate(fd: int) -> bool:
    """Block until scaffold opens the gate (a byte) or withdraws the start (EOF)."""
    try:
        while True:
            try:
                return posix.read(fd, 1) != b""
            except InterruptedError:
                continue
    except OSError as exc:
        sys.stderr.write(f"scaffold sandbox bridge: cannot read the gate: {exc}\n")
        return False
    finally:
        _quietly(posix.close, fd)


def _forward_until_exit(pid: int) -> int:
    """Pass SIGTERM, SIGINT and SIGHUP on to the agent until it exits; its wait status."""
    while True:
        signum = _signal.sigwait(_WATCHED)
        if signum != _signal.SIGCHLD:
            _quietly(posix.kill, pid, signum)
            continue
        done, status = posix.waitpid(pid, posix.WNOHANG)
        if done == pid:
            return int(status)


def main(argv: list[str]) -> int:
    forwards: list[str] = []
    gate: int | None = None
    while len(argv) >= 2 and argv[0] in ("--forward", "--gate"):
        if argv[0] == "--gate":
            if not argv[1].isdigit() or gate is not None:
                argv = []
                break
            gate = int(argv[1])
        else:
            forwards.append(argv[1])
        argv = argv[2:]
    if not argv or argv[0] != "--" or len(argv) < 2:
        sys.stderr.write(
            "scaffold sandbox bridge: usage: [--forward ADDR:PORT=SOCK]... [--gate FD] -- ARGV\n"
        )
        return 2
    command = argv[1:]
    try:
        listeners = [_listen(spec) for spec in forwards]
    except (OSError, ValueError) as exc:
        sys.stderr.write(f"scaffold sandbox bridge: cannot listen: {exc}\n")
        return 126
    if gate is not None and not _wait_for_gate(gate):
        return 125  # the start was withdrawn: the agent never ran
    sys.stderr.flush()
    # Blocked from before the fork, and taken one by one: a signal sent the moment the
    # agent starts is forwarded, never lost (a handler installed after the fork missed
    # it, or ran only once the agent had exited).
    _signal.pthread_sigmask(_signal.SIG_BLOCK, _WATCHED)
    pid = posix.fork()  # before any thread starts: the child runs no other thread's state
    if pid == 0:
        _exec_child(command)
    for listener, target in listeners:  # the threads inherit the blocked signals
        _thread.start_new_thread(_accept_loop, (listener, target))
    status = _forward_until_exit(pid)
    code = posix.waitstatus_to_exitcode(status)
    sys.stderr.flush()
    # Accept threads may sit in accept(); leave without waiting for them.
    posix._exit(code if code >= 0 else 128 - code)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))  # the usage and listen errors (2, 126) were exit 0 before
