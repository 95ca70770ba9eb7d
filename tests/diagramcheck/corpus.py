"""Real projects' consecutive releases as git histories, and DiagramCheck's findings on them.

Each ``tests/fixtures/diagramcheck_corpus/<project>.tar.xz`` holds the ``.py``, ``.pyi``
and ``.md`` files (and the license) of a few consecutive releases from PyPI. A
project's history is:

1. the first release, with diagrams drafted by ``diagrams generate`` (in sync);
2. for every next release: a docs-only commit (its Markdown, nothing else), then the
   release's code. The diagrams are never updated, so every finding says what the
   new release asks of them; the labels say whether that is true.
"""

from __future__ import annotations

import itertools
import shutil
import subprocess
import tarfile
import traceback
from dataclasses import dataclass, field
from pathlib import Path

from scaffold.config import DiagramsConfig
from scaffold.diagramcheck import generate as gen
from scaffold.diagramcheck.analyzer import analyze
from scaffold.diagramcheck.findings import Finding

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "diagramcheck_corpus"
IDENTITY = ("-c", "user.name=Corpus", "-c", "user.email=corpus@example.invalid")
DIAGRAMS = "docs/diagrams"
# One line per corpus run, printed in pytest's terminal summary (conftest.py).
SUMMARY: list[str] = []


@dataclass(frozen=True)
class Step:
    project: str
    label: str  # "0.27.0..0.27.2 docs" or "0.27.0..0.27.2 code"
    base: str
    head: str


@dataclass
class Outcome:
    findings: dict[str, list[Finding]] = field(default_factory=dict)  # step id -> findings
    crashes: dict[str, str] = field(default_factory=dict)  # step id -> traceback


def step_id(step: Step) -> str:
    return f"{step.project} {step.label}"


def finding_key(f: Finding) -> str:
    return f"{f.kind} {f.source}:{f.name}"


def releases(archive: Path) -> dict[str, dict[str, bytes]]:
    """``version -> {path: content}`` from one project's archive."""
    out: dict[str, dict[str, bytes]] = {}
    with tarfile.open(archive, "r:xz") as tar:
        for member in tar.getmembers():
            if not member.isfile():
                continue
            version, _, rel = member.name.partition("/")
            handle = tar.extractfile(member)
            if handle is not None and rel:
                out.setdefault(version, {})[rel] = handle.read()
    return dict(sorted(out.items(), key=lambda kv: _version_key(kv[0])))


def _version_key(version: str) -> tuple[int, ...]:
    return tuple(int(p) if p.isdigit() else 0 for p in version.split("."))


def git(root: Path, *args: str) -> str:
    return subprocess.run(
        ["git", *IDENTITY, *args], cwd=root, check=True, capture_output=True, text=True
    ).stdout.strip()


def _commit(root: Path, message: str) -> str:
    git(root, "add", "-A")
    git(root, "commit", "-q", "--allow-empty", "-m", message)
    return git(root, "rev-parse", "HEAD")


def _replace_tree(root: Path, files: dict[str, bytes], keep: tuple[str, ...]) -> None:
    """The worktree becomes ``files`` (paths under ``keep`` and ``.git`` stay as they are)."""
    for child in root.iterdir():
        if child.name == ".git":
            continue
        if child.is_dir():
            for path in sorted(child.rglob("*"), reverse=True):
                rel = path.relative_to(root).as_posix()
                if any(rel == k or rel.startswith(k + "/") for k in keep):
                    continue
                if path.is_dir():
                    if not any(path.iterdir()):
                        path.rmdir()
                else:
                    path.unlink()
            if not any(child.iterdir()):
                child.rmdir()
        else:
            child.unlink()
    for rel, data in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)


def build_history(archive: Path, root: Path) -> list[Step]:
    """The project's history in a new repository at ``root``; the steps to check."""
    project = archive.name.removesuffix(".tar.xz")
    versions = releases(archive)
    root.mkdir(parents=True)
    git(root, "init", "-q", "-b", "main")
    names = list(versions)
    first = versions[names[0]]
    _replace_tree(root, first, ())
    cfg = DiagramsConfig()
    bodies = gen.drafts(gen.read_sources(root, cfg), cfg, gen.KINDS)
    gen.write_drafts(root, cfg, bodies)
    previous = _commit(root, f"{project} {names[0]} with its diagrams")
    steps: list[Step] = []
    for old, new in itertools.pairwise(names):
        files = versions[new]
        current = {
            p.relative_to(root).as_posix(): p.read_bytes()
            for p in root.rglob("*")
            if p.is_file() and ".git" not in p.relative_to(root).parts
        }
        docs = {p: d for p, d in current.items() if not p.endswith(".md")}
        docs.update({p: d for p, d in files.items() if p.endswith(".md")})
        _replace_tree(root, docs, (DIAGRAMS,))
        head = _commit(root, f"{project} {new}: docs")
        steps.append(Step(project, f"{old}..{new} docs", previous, head))
        previous = head
        _replace_tree(root, dict(files), (DIAGRAMS,))
        head = _commit(root, f"{project} {new}: code")
        steps.append(Step(project, f"{old}..{new} code", previous, head))
        previous = head
    return steps


def run(workdir: Path) -> Outcome:
    """Every step of every project in the corpus, checked; crashes recorded, not raised."""
    outcome = Outcome()
    for archive in sorted(FIXTURES.glob("*.tar.xz")):
        root = workdir / archive.name.removesuffix(".tar.xz")
        if root.exists():
            shutil.rmtree(root)
        for step in build_history(archive, root):
            try:
                report = analyze(root, step.base, step.head)
            except Exception:  # the corpus counts crashes instead of stopping at one
                outcome.crashes[step_id(step)] = traceback.format_exc()
                continue
            outcome.findings[step_id(step)] = list(report.findings)
    return outcome
