"""Shared helpers for the simulator's own tests: a webhook receiver and a git client."""

from __future__ import annotations

import os
import subprocess
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from ghsim.fixture import github_sim  # noqa: F401
from ghsim.server import GitHubSimulator


@dataclass
class Received:
    headers: dict[str, str]
    body: bytes


@dataclass
class Receiver:
    url: str
    received: list[Received] = field(default_factory=list)
    status: int = 200


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


def git(cwd: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("GIT_")}
    env.update(
        GIT_CONFIG_GLOBAL=os.devnull,
        GIT_CONFIG_NOSYSTEM="1",
        GIT_TERMINAL_PROMPT="0",
        GIT_AUTHOR_NAME="Dev",
        GIT_AUTHOR_EMAIL="dev@example.invalid",
        GIT_COMMITTER_NAME="Dev",
        GIT_COMMITTER_EMAIL="dev@example.invalid",
    )
    proc = subprocess.run(
        ["git", *args], cwd=cwd, env=env, capture_output=True, text=True, check=False
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {args} failed: {proc.stderr}")
    return proc


def auth_header(token: str) -> str:
    import base64

    return "Authorization: Basic " + base64.b64encode(f"x-access-token:{token}".encode()).decode()


def clone(sim: GitHubSimulator, full_name: str, dest: Path, token: str) -> Path:
    url = f"{sim.url}/git/{full_name}.git"
    git(dest.parent, "-c", f"http.extraHeader={auth_header(token)}", "clone", "-q", url, str(dest))
    git(dest, "config", "http.extraHeader", auth_header(token))
    return dest


def commit_file(work: Path, name: str, text: str, message: str) -> str:
    (work / name).parent.mkdir(parents=True, exist_ok=True)
    (work / name).write_text(text)
    git(work, "add", name)
    git(work, "commit", "-q", "-m", message)
    return git(work, "rev-parse", "HEAD").stdout.strip()
