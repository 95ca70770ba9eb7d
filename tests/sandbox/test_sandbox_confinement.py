"""What a sandboxed process sees, tried with real bubblewrap on real git repositories."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from git.gitrepo import git, make_repo
from scaffold.config import SandboxConfig
from scaffold.errors import SandboxError
from scaffold.sandbox.confinement import Confinement, confine, install_root, worktree_git_dirs
from scaffold.sandbox.settings import ENV_WRITABLE, Sandbox, resolve_sandbox


def _sandbox(**environ: str) -> Sandbox:
    return resolve_sandbox(SandboxConfig(mode="bwrap"), strict=True, environ=environ)


def _repo(root: Path) -> Path:
    repo = make_repo(root / "repo")
    (repo / ".scaffold").mkdir()
    (repo / ".scaffold" / "journal").write_text("secret journal\n")
    saved = repo / ".git" / "scaffold-indexes"  # Workspace.commit_all's saved indexes
    saved.mkdir()
    (saved / f"task-1-{'0' * 40}.index").write_bytes(b"DIRC")
    for n in (1, 2):
        path = str(repo / ".scaffold" / "worktrees" / f"task-{n}")
        git(repo, "worktree", "add", "-q", "-b", f"scaffold/task-{n}", path)
    return repo


def _run(
    sandbox: Sandbox, c: Confinement, script: str, **extra_env: str
) -> subprocess.CompletedProcess[str]:
    argv, env = confine(sandbox, c, [sys.executable, "-c", script], dict(os.environ))
    return subprocess.run(
        argv, env=env | extra_env, capture_output=True, text=True, timeout=60, check=False
    )


_PROBE = """
import os, pathlib, sys
def can_read(p):
    try:
        return bool(os.listdir(p)) if os.path.isdir(p) else bool(open(p, 'rb').read())
    except OSError:
        return False
def can_write(p):
    try:
        with open(p, 'a') as fh: fh.write('x')
        return True
    except OSError:
        return False
for line in os.environ['PROBE'].split(';'):
    kind, path = line.split(':', 1)
    print(kind, path, (can_read if kind == 'r' else can_write)(path))
"""


def _probe(sandbox: Sandbox, c: Confinement, checks: list[str]) -> dict[str, bool]:
    done = _run(sandbox, c, _PROBE, PROBE=";".join(checks))
    assert done.returncode == 0, done.stderr
    out = {}
    for line in done.stdout.splitlines():
        kind, path, result = line.split(" ")
        out[f"{kind}:{path}"] = result == "True"
    return out


def test_a_task_sees_its_worktree_and_nothing_of_scaffold(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    own = repo / ".scaffold" / "worktrees" / "task-1"
    other = repo / ".scaffold" / "worktrees" / "task-2"
    c = Confinement(repo=repo, cwd=own, private=tmp_path / "private", worktree=own)
    seen = _probe(
        _sandbox(),
        c,
        [
            f"w:{own}/new.py",
            f"r:{own}/README.md",
            f"r:{repo}/.scaffold/journal",
            f"r:{other}/README.md",
            f"w:{repo}/.git/config",
            f"w:{repo}/.git/hooks/pre-commit",
            f"w:{repo}/.git/scaffold-indexes/task-1-{'0' * 40}.index",
            f"w:{own}/.git",
            f"r:{repo}/.git/HEAD",
            f"w:{tmp_path}/private/home/.claude.json",
            "w:/etc/passwd",
        ],
    )
    assert seen == {
        f"w:{own}/new.py": True,
        f"r:{own}/README.md": True,
        f"r:{repo}/.scaffold/journal": False,
        f"r:{other}/README.md": False,
        f"w:{repo}/.git/config": False,
        f"w:{repo}/.git/hooks/pre-commit": False,
        # scaffold's saved indexes (Workspace.commit_all trusts their stat data).
        f"w:{repo}/.git/scaffold-indexes/task-1-{'0' * 40}.index": False,
        f"w:{own}/.git": False,
        f"r:{repo}/.git/HEAD": True,
        f"w:{tmp_path}/private/home/.claude.json": True,
        "w:/etc/passwd": False,
    }
    assert (own / "new.py").exists()
    assert "x" not in (repo / ".git" / "config").read_text()


def test_git_works_inside_and_its_objects_stay_private(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    own = repo / ".scaffold" / "worktrees" / "task-1"
    (own / "work.txt").write_text("work\n")
    c = Confinement(repo=repo, cwd=own, private=tmp_path / "private", worktree=own)
    script = (
        "import subprocess\n"
        "print(subprocess.run(['git','status','--short'],capture_output=True,text=True).stdout)\n"
        "print(subprocess.run(['git','add','work.txt']).returncode)\n"
        "print(subprocess.run(['git','update-ref','refs/heads/main','HEAD']).returncode)\n"
    )
    done = _run(_sandbox(), c, script)
    lines = done.stdout.split()
    assert lines[:2] == ["??", "work.txt"]
    assert lines[2] == "0"  # staging works: objects go to the private store
    assert lines[3] != "0"  # refs are read-only
    assert any((tmp_path / "private" / "git-objects").iterdir())


def test_planning_reads_the_repository_and_writes_nothing_there(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    c = Confinement(repo=repo, cwd=repo, private=tmp_path / "private")
    seen = _probe(
        _sandbox(), c, [f"r:{repo}/README.md", f"w:{repo}/README.md", f"r:{repo}/.scaffold/journal"]
    )
    assert seen == {
        f"r:{repo}/README.md": True,
        f"w:{repo}/README.md": False,
        f"r:{repo}/.scaffold/journal": False,
    }


def test_a_plain_checkout_gets_a_private_index(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    (repo / "new.txt").write_text("n\n")
    c = Confinement(repo=repo, cwd=repo, private=tmp_path / "private", worktree=repo)
    script = (
        "import subprocess\n"
        "print(subprocess.run(['git','add','new.txt']).returncode)\n"
        "print(open('.git/config','a') and 'config writable')\n"
    )
    done = _run(_sandbox(), c, script)
    assert done.stdout.splitlines()[0] == "0"
    assert "Read-only file system" in done.stderr
    # The real index never saw the agent's add.
    assert "?? new.txt" in git(repo, "status", "--short")


def test_operator_paths_cannot_expose_scaffold_state(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    own = repo / ".scaffold" / "worktrees" / "task-1"
    sandbox = _sandbox(**{ENV_WRITABLE: str(repo / ".scaffold")})
    c = Confinement(repo=repo, cwd=own, private=tmp_path / "private", worktree=own)
    with pytest.raises(SandboxError, match="would expose"):
        confine(sandbox, c, ["true"], dict(os.environ))


def test_a_worktree_pointer_outside_the_repository_is_refused(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    own = repo / ".scaffold" / "worktrees" / "task-1"
    (own / ".git").write_text(f"gitdir: {tmp_path}\n")
    with pytest.raises(SandboxError):
        worktree_git_dirs(own)


def test_install_roots(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    (venv / "pyvenv.cfg").write_text("home = /opt/python/3.11/bin\n")
    assert install_root(venv / "bin" / "python") == [Path("/opt/python/3.11"), venv]
    modules = tmp_path / "tools" / "node_modules"
    (modules / ".bin").mkdir(parents=True)
    (modules / "pkg").mkdir()
    (modules / "pkg" / "cli").write_text("")
    (modules / ".bin" / "cli").symlink_to(modules / "pkg" / "cli")
    assert install_root(modules / ".bin" / "cli") == [modules]
    assert install_root(Path("/usr/local/bin/tool")) == [Path("/usr/local")]


def test_a_planted_symlink_in_the_private_home_is_not_followed(tmp_path: Path) -> None:
    repo = _repo(tmp_path)
    own = repo / ".scaffold" / "worktrees" / "task-1"
    real_home = tmp_path / "real-home"
    (real_home / ".claude").mkdir(parents=True)
    (real_home / ".claude" / ".credentials.json").write_text('{"token": "t"}')
    private = tmp_path / "private"
    target = tmp_path / "elsewhere"
    target.mkdir()
    (private / "home").mkdir(parents=True)
    (private / "home" / ".claude").symlink_to(target)  # what an agent could leave behind
    c = Confinement(repo=repo, cwd=own, private=private, worktree=own)
    confine(_sandbox(), c, ["true"], {**os.environ, "HOME": str(real_home)})
    assert list(target.iterdir()) == []
    fresh = Confinement(repo=repo, cwd=own, private=tmp_path / "private-2", worktree=own)
    confine(_sandbox(), fresh, ["true"], {**os.environ, "HOME": str(real_home)})
    copied = tmp_path / "private-2" / "home" / ".claude" / ".credentials.json"
    assert copied.read_text() == '{"token": "t"}'
    assert copied.stat().st_mode & 0o777 == 0o600
