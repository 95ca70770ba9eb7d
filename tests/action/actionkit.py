"""A GitHub Actions-like step for the action tests: real git repos, real payloads, real CLI."""

from __future__ import annotations

import copy
import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from git.gitrepo import git

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "tests" / "fixtures" / "github" / "webhook-examples"
ARCH = "docs/diagrams/02-architecture.md"
DATA = "docs/diagrams/05-data-model.md"
STATES = "docs/diagrams/03-state-machine.md"
ROADMAP = "docs/diagrams/04-roadmap.md"


def mermaid_doc(body: str) -> str:
    return f"# Diagram\n\n```mermaid\n{body.strip()}\n```\n"


@dataclass
class Repo:
    root: Path

    @classmethod
    def create(cls, root: Path, *, diagrams: bool = True) -> Repo:
        root.mkdir(parents=True)
        repo = cls(root)
        repo.git("init", "-q", "-b", "main")
        repo.write("README.md", "# project\n")
        if diagrams:
            repo.write(ARCH, mermaid_doc("flowchart LR\n    app"))
            repo.write(DATA, mermaid_doc("classDiagram\n    class Placeholder"))
            repo.write(STATES, mermaid_doc("stateDiagram-v2\n    [*] --> Start"))
            repo.write(ROADMAP, mermaid_doc("flowchart LR\n    m0[Start]"))
        repo.write("app/pkg/__init__.py", "")
        repo.commit("initial")
        return repo

    def git(self, *args: str) -> str:
        return git(self.root, *args)

    def write(self, rel: str, content: str) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content, encoding="utf-8")

    def commit(self, message: str = "change") -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")


def example(event: str, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((EXAMPLES / event / name).read_text(encoding="utf-8"))
    return copy.deepcopy(data)


def pull_request_payload(base: str, head: str) -> dict[str, Any]:
    payload = example("pull_request", "opened.1.json")
    payload["pull_request"]["base"]["sha"] = base
    payload["pull_request"]["head"]["sha"] = head
    return payload


def push_payload(before: str, after: str) -> dict[str, Any]:
    payload = example("push", "_.4.json")  # a branch push
    payload["before"] = before
    payload["after"] = after
    payload["created"] = before == "0" * 40
    payload["head_commit"]["id"] = after
    return payload


@dataclass
class Step:
    """The files and variables of one workflow step."""

    root: Path
    workspace: Path
    event_name: str = ""
    payload: dict[str, Any] | None = None
    extra_env: dict[str, str] = field(default_factory=dict)

    @property
    def output_file(self) -> Path:
        return self.root / "github_output"

    @property
    def summary_file(self) -> Path:
        return self.root / "step_summary.md"

    @property
    def runner_temp(self) -> Path:
        return self.root / "runner_temp"

    def env(self) -> dict[str, str]:
        self.root.mkdir(parents=True, exist_ok=True)
        self.runner_temp.mkdir(exist_ok=True)
        self.output_file.touch()
        self.summary_file.touch()
        env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "RUNNER_"))}
        env.update(
            {
                "GITHUB_ACTIONS": "true",
                "GITHUB_WORKSPACE": str(self.workspace),
                "GITHUB_OUTPUT": str(self.output_file),
                "GITHUB_STEP_SUMMARY": str(self.summary_file),
                "RUNNER_TEMP": str(self.runner_temp),
                "GITHUB_EVENT_NAME": self.event_name,
            }
        )
        if self.payload is not None:
            event_path = self.root / "event.json"
            event_path.write_text(json.dumps(self.payload), encoding="utf-8")
            env["GITHUB_EVENT_PATH"] = str(event_path)
        env.update(self.extra_env)
        return env

    def run(self, *args: str, timeout: float = 90) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "scaffold", "action", *args],
            cwd=self.workspace,
            env=self.env(),
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )

    def outputs(self) -> dict[str, str]:
        return parse_outputs(self.output_file.read_text(encoding="utf-8"))

    def summary(self) -> str:
        return self.summary_file.read_text(encoding="utf-8")


_HEREDOC = re.compile(r"^([A-Za-z_][A-Za-z0-9_-]*)<<(\S+)$")


def parse_outputs(text: str) -> dict[str, str]:
    """Read a GITHUB_OUTPUT file the way the runner does (both forms)."""
    lines = text.split("\n")
    out: dict[str, str] = {}
    i = 0
    while i < len(lines):
        line = lines[i]
        i += 1
        if not line:
            continue
        m = _HEREDOC.match(line)
        if m:
            name, delim = m.groups()
            value: list[str] = []
            while lines[i] != delim:
                value.append(lines[i])
                i += 1
            i += 1
            out[name] = "\n".join(value)
        else:
            name, _, val = line.partition("=")
            out[name] = val
    return out
