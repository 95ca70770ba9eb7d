"""Network egress of a sandboxed agent: an allow-list built into the plumbing.

An agent's sandbox has no network of its own. For each host it may reach (the model
API, the hosts of ``sandbox.allow_domains``) scaffold serves one unix socket, bound
into the sandbox; the bridge inside (:mod:`scaffold.sandbox.bridge`) listens on a
loopback address for it, and the sandbox's ``/etc/hosts`` names that address. A
connection therefore reaches exactly the host scaffold chose for that socket, TLS and
all (the bytes are relayed, never read): there is no address an agent can pass to
reach anywhere else, and no proxy setting it can ignore.

:func:`plan_egress` is pure (which hosts, which inside addresses); :class:`EgressGate`
serves the sockets on the running event loop for one agent run.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = ["EgressGate", "Route", "hosts_file", "plan_egress"]

_LOOPBACK_NAMES = {"localhost", "localhost.localdomain", "ip6-localhost"}
_LOOPBACK = "127.0.0.1"
_CONNECT_TIMEOUT_S = 30.0
_FIRST_INSIDE = 10  # 127.0.0.10 and up name the allowed hosts inside


@dataclass(frozen=True, slots=True)
class Route:
    """One allowed destination: ``host:port`` outside, ``inside:port`` in the sandbox."""

    host: str
    port: int
    inside: str
    socket_name: str
    # Where the gate connects, when not ``host:port`` itself (tests point names at loopback).
    connect_to: tuple[str, int] | None = None


def _is_loopback(host: str) -> bool:
    if host.lower() in _LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _split(entry: str) -> tuple[str, int]:
    host, sep, port = entry.rpartition(":")
    if sep and port.isdigit():
        return host.lower(), int(port)
    return entry.lower(), 443


def plan_egress(model: tuple[str, int], allow_domains: Sequence[str]) -> list[Route]:
    """The routes of one run: the model API first, then the allowed domains."""
    wanted: list[tuple[str, int]] = [(model[0].lower(), model[1])]
    wanted += [_split(d) for d in allow_domains]
    routes: list[Route] = []
    inside_of: dict[str, str] = {}
    taken: set[tuple[str, int]] = set()
    for host, port in wanted:
        if _is_loopback(host):
            inside = _LOOPBACK
        else:
            inside = inside_of.setdefault(host, f"127.0.0.{_FIRST_INSIDE + len(inside_of)}")
        if (inside, port) in taken or len(inside_of) > 200:
            continue
        taken.add((inside, port))
        routes.append(Route(host, port, inside, f"egress-{len(routes)}.sock"))
    return routes


def hosts_file(routes: Sequence[Route]) -> str:
    """``/etc/hosts`` inside: the allowed names resolve to their inside addresses."""
    lines = ["127.0.0.1\tlocalhost", "::1\tlocalhost ip6-localhost"]
    named: dict[str, str] = {}
    for route in routes:
        if route.inside != _LOOPBACK:
            named.setdefault(route.host, route.inside)
    lines += [f"{inside}\t{host}" for host, inside in named.items()]
    return "\n".join(lines) + "\n"


class EgressGate:
    """Serves one unix socket per route in ``directory`` while the run lasts."""

    def __init__(self, directory: Path, routes: Sequence[Route]):
        self.directory = directory
        self.routes = list(routes)
        self._servers: list[asyncio.Server] = []
        self._streams: set[asyncio.Task[None]] = set()

    async def __aenter__(self) -> EgressGate:
        for route in self.routes:
            path = self.directory / route.socket_name
            handler = functools.partial(self._relay, route=route)
            server = await asyncio.start_unix_server(handler, path=str(path))
            self._servers.append(server)
        return self

    async def __aexit__(self, *exc: object) -> None:
        for server in self._servers:
            server.close()
        for task in list(self._streams):
            task.cancel()
        for server in self._servers:
            with contextlib.suppress(Exception):
                await server.wait_closed()
        self._servers.clear()

    async def _relay(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, route: Route
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._streams.add(task)
        try:
            try:
                host, port = route.connect_to or (route.host, route.port)
                up_r, up_w = await asyncio.wait_for(
                    asyncio.open_connection(host, port), _CONNECT_TIMEOUT_S
                )
            except (OSError, TimeoutError):
                return
            try:
                await asyncio.gather(_copy(reader, up_w), _copy(up_r, writer))
            finally:
                up_w.close()
        except asyncio.CancelledError:
            # The run is over (``__aexit__``): the connection ends here. Python 3.11's
            # stream protocol asks a cancelled handler for its exception and logs an
            # error; a handler that returns is simply done.
            return
        finally:
            writer.close()
            if task is not None:
                self._streams.discard(task)


async def _copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while True:
            data = await reader.read(65536)
            if not data:
                break
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (OSError, ConnectionError):
        pass
