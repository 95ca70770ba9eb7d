"""Fixtures of the simulator's own tests: the simulator and a webhook receiver."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from ghsim_helpers import Received, Receiver

from ghsim.fixture import github_sim  # noqa: F401


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    box: list[Receiver] = []

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", "0"))
            body = self.rfile.read(length)
            box[0].received.append(Received(dict(self.headers.items()), body))
            self.send_response(box[0].status)
            self.end_headers()
            self.wfile.write(b"ok")

        def log_message(self, *args: object) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    box.append(Receiver(f"http://127.0.0.1:{server.server_address[1]}/webhook"))
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield box[0]
    server.shutdown()
    server.server_close()
