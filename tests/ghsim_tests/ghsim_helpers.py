"""Helpers for the simulator's own tests: what a webhook receiver got, and a git client.
(A module of its own name: ``conftest`` is taken by other test folders run alongside.)"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

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
