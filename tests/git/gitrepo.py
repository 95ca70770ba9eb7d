"""Real git repositories for the git adapter tests (made in tmp_path)."""

from __future__ import annotations

import subprocess
from pathlib import Path

# Identity for commits the tests make themselves (scaffold brings its own).
TEST_IDENTITY = ("-c", "user.name=Test Person", "-c", "user.email=test@example.com")


def git(cwd: Path, *args: str, check: bool = True) -> str:
    """Run git in ``cwd`` and return stdout (stripped of the final newline)."""
    proc = subprocess.run(
        ["git", *TEST_IDENTITY, *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        check=False,
    )
    if check and proc.returncode != 0:
        raise AssertionError(f"git {' '.join(args)} failed: {proc.stderr}")
    return proc.stdout.rstrip("\n")


def write(root: Path, rel: str, content: str) -> Path:
    path = root / rel
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(content, encoding="utf-8")
    return path


def commit_file(root: Path, rel: str, content: str, message: str | None = None) -> str:
    write(root, rel, content)
    git(root, "add", "--", rel)
    git(root, "commit", "-q", "-m", message or f"write {rel}")
    return git(root, "rev-parse", "HEAD")


def make_repo(path: Path, branch: str = "main") -> Path:
    """A repository with one commit (README.md, lines.txt) on ``branch``."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", branch)
    write(path, "README.md", "# demo\n")
    write(path, "lines.txt", "one\ntwo\nthree\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "initial")
    return path


def status(root: Path) -> str:
    """``git status --porcelain`` including untracked files."""
    return git(root, "status", "--porcelain", "--untracked-files=all")


def tip(root: Path, ref: str) -> str:
    return git(root, "rev-parse", ref)
