"""A small git repository builder for the DiagramCheck tests (fixed identity, real git)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from scaffold.diagramcheck.analyzer import analyze
from scaffold.diagramcheck.findings import Report

IDENTITY = ("-c", "user.name=Test Person", "-c", "user.email=test@example.com")
ARCH = "docs/diagrams/02-architecture.md"
DATA = "docs/diagrams/05-data-model.md"
STATES = "docs/diagrams/03-state-machine.md"
ROADMAP = "docs/diagrams/04-roadmap.md"


# ``python -c MODULES_PROBE <scaffold args>``: runs the command line in-process, then
# prints the sorted names of every module it imported to stderr, as JSON.
MODULES_PROBE = """
import json, sys
from scaffold.cli.entry import main
sys.argv = ["scaffold", *sys.argv[1:]]
try:
    main()
except SystemExit:
    pass
print(json.dumps(sorted(sys.modules)), file=sys.stderr)
"""


def modules_loaded(root: Path, *args: str) -> set[str]:
    """The modules ``scaffold <args>`` imported, run in ``root`` (:data:`MODULES_PROBE`)."""
    proc = subprocess.run(
        [sys.executable, "-c", MODULES_PROBE, *args],
        cwd=root,
        capture_output=True,
        text=True,
        check=False,
        timeout=120,
    )
    return set(json.loads(proc.stderr.strip().splitlines()[-1]))


def mermaid_doc(body: str, title: str = "Diagram") -> str:
    return f"# {title}\n\nSome prose.\n\n```mermaid\n{body.strip()}\n```\n"


@dataclass
class Repo:
    root: Path

    @classmethod
    def create(cls, root: Path) -> Repo:
        root.mkdir(parents=True)
        repo = cls(root)
        repo.git("init", "-q", "-b", "main")
        repo.write("README.md", "# project\n")
        repo.write(ARCH, mermaid_doc("flowchart LR\n    app"))
        repo.write(DATA, mermaid_doc("classDiagram\n    class Placeholder"))
        repo.write(STATES, mermaid_doc("stateDiagram-v2\n    [*] --> Start"))
        repo.write(ROADMAP, mermaid_doc("flowchart LR\n    m0[Start]"))
        repo.write("app/pkg/__init__.py", "")
        repo.commit("initial")
        return repo

    def git(self, *args: str) -> str:
        proc = subprocess.run(
            ["git", *IDENTITY, *args], cwd=self.root, capture_output=True, text=True, check=False
        )
        if proc.returncode != 0:
            raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
        return proc.stdout.strip()

    def write(self, rel: str, content: str | bytes) -> None:
        path = self.root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        if isinstance(content, bytes):
            path.write_bytes(content)
        else:
            path.write_text(content, encoding="utf-8")

    def remove(self, rel: str) -> None:
        self.git("rm", "-q", "--", rel)

    def move(self, old: str, new: str) -> None:
        (self.root / new).parent.mkdir(parents=True, exist_ok=True)
        self.git("mv", "--", old, new)

    def commit(self, message: str = "change") -> str:
        self.git("add", "-A")
        self.git("commit", "-q", "--allow-empty", "-m", message)
        return self.head()

    def head(self) -> str:
        return self.git("rev-parse", "HEAD")

    def check(self, base: str, head: str = "HEAD") -> Report:
        return analyze(self.root, base, head)

    def change(self, files: dict[str, str], message: str = "change") -> Report:
        """Commit ``files`` on top of HEAD and check that commit against its parent."""
        base = self.head()
        for rel, content in files.items():
            self.write(rel, content)
        self.commit(message)
        return self.check(base)


def kinds(report: Report) -> list[tuple[str, str]]:
    """``(kind, name)`` of the blocking findings, sorted."""
    return sorted((f.kind, f.name) for f in report.failures)
