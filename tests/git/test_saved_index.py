"""scaffold's saved index of a task worktree: fewer files hashed, never a change missed.

``Workspace.commit_all`` starts from a copy of the index its last commit left (made with
the worktree by ``create_worktree``), so ``git add -A`` hashes only files whose stat
changed, instead of every file of the repository at every hand-off. Every commit must
still be exactly the commit of a fresh index (``read-tree`` + ``add -A``), including
after an agent rewrote a file in place within the same second, kept its size and put
its mtime back: the one change git's own stat check misses (``index_file``).
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import time
from pathlib import Path

import pytest
from gitrepo import git, make_repo, write

from harness import rewrite_keeping_stat
from scaffold.git.index_file import INDEX_CACHE, smudge_recent
from scaffold.git.workspace import Workspace

TASK = "TASK-1"


def fresh_tree(wt: Path, tip: str, tmp: Path) -> str:
    """The tree the long way gives: a fresh index of the tip, then every file added."""
    env = {**os.environ, "GIT_INDEX_FILE": str(tmp / "fresh-index")}
    (tmp / "fresh-index").unlink(missing_ok=True)
    for args in (["read-tree", tip], ["add", "-A"]):
        subprocess.run(["git", *args], cwd=wt, env=env, check=True, capture_output=True)
    out = subprocess.run(
        ["git", "write-tree"], cwd=wt, env=env, check=True, capture_output=True, text=True
    )
    return out.stdout.strip()


def saved(repo: Path) -> list[Path]:
    folder = repo / ".git" / INDEX_CACHE
    return sorted(folder.iterdir()) if folder.is_dir() else []


def sizes(index: Path, cwd: Path) -> dict[str, int]:
    """Each entry's recorded size, as git reads the index (``ls-files --debug``)."""
    out = subprocess.run(
        ["git", "ls-files", "--debug"],
        cwd=cwd,
        env={**os.environ, "GIT_INDEX_FILE": str(index)},
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    result: dict[str, int] = {}
    name = ""
    for line in out.splitlines():
        if not line.startswith(" "):
            name = line
        elif "size:" in line:
            result[name] = int(line.split("size:")[1].split()[0])
    return result


def test_the_hazard_is_real_with_a_plain_copy_of_an_index(tmp_path: Path) -> None:
    """Why the saved index is smudged: with an index copied as is, this git misses a
    same-second in-place rewrite whose mtime was put back (it compares whole seconds)."""
    repo = make_repo(tmp_path / "r")
    f = repo / "lines.txt"
    old = time.time() - 3600
    os.utime(f, (old, old))
    git(repo, "add", "-A")
    copy = tmp_path / "copy"
    for _ in range(20):  # until the rewrite lands in the same ctime second
        copy.write_bytes((repo / ".git" / "index").read_bytes())
        start = int(f.stat().st_ctime)
        rewrite_keeping_stat(f, "one\nTWO\nthree\n")
        if int(f.stat().st_ctime) == start:
            break
        rewrite_keeping_stat(f, "one\ntwo\nthree\n")
        git(repo, "add", "-A")
    else:
        pytest.skip("could not land a rewrite in the same second")
    env = {**os.environ, "GIT_INDEX_FILE": str(copy)}
    subprocess.run(["git", "add", "-A"], cwd=repo, env=env, check=True)
    staged = subprocess.run(
        ["git", "ls-files", "-s", "lines.txt"],
        cwd=repo,
        env=env,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()[1]
    assert staged != git(repo, "hash-object", "lines.txt")  # git missed it


def test_a_same_second_rewrite_with_its_mtime_put_back_is_committed(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    ws = Workspace(repo)
    wt = ws.create_worktree(TASK)
    f = write(wt, "data.txt", "alpha\n")
    old = time.time() - 3600
    os.utime(f, (old, old))
    first = ws.commit_all(TASK, "first")
    assert first is not None
    assert saved(repo)
    rewrite_keeping_stat(f, "omega\n")
    second = ws.commit_all(TASK, "second")
    assert second is not None
    assert git(repo, "show", f"{second}:data.txt") == "omega"
    assert git(wt, "status", "--porcelain") == ""


def test_every_commit_is_the_fresh_index_commit(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    ws = Workspace(repo)
    wt = ws.create_worktree(TASK)
    steps = [
        lambda: write(wt, "a/one.py", "print(1)\n"),
        (wt / "README.md").unlink,
        lambda: write(wt, "lines.txt", "one\ntwo\nthree\nfour\n"),
        lambda: os.rename(wt / "a" / "one.py", wt / "a" / "two.py"),
        lambda: (wt / "a" / "two.py").chmod(0o755),
        lambda: os.symlink("lines.txt", wt / "link"),
        lambda: write(wt, ".gitignore", "*.log\n") and write(wt, "x.log", "ignored\n"),
        lambda: None,
        lambda: os.utime(wt / "lines.txt"),  # stat only: no write-tree, no commit
        lambda: write(wt, "lines.txt", "one\ntwo\nthree\nfour\n"),  # the same bytes again
        lambda: (wt / "a" / "two.py").chmod(0o644),  # the mode alone
        lambda: write(wt, "lines.txt", "ONE\ntwo\nthree\nfour\n"),  # same size, same second
    ]
    for step in steps:
        step()
        tip = git(repo, "rev-parse", "scaffold/task-1")
        expected = fresh_tree(wt, tip, tmp_path)
        new = ws.commit_all(TASK, "step")
        got = git(repo, "rev-parse", f"{new or tip}^{{tree}}")
        assert got == expected
        assert len(saved(repo)) == 1  # one saved index per task, of the newest tip
        assert saved(repo)[0].name == f"task-1-{new or tip}.index"


@pytest.mark.parametrize("damage", ["garbage", "truncated", "symlink", "directory"])
def test_a_damaged_saved_index_is_not_used(tmp_path: Path, damage: str) -> None:
    repo = make_repo(tmp_path / "r")
    ws = Workspace(repo)
    wt = ws.create_worktree(TASK)
    (path,) = saved(repo)
    decoy = tmp_path / "decoy-index"
    decoy.write_bytes(path.read_bytes())
    path.unlink()
    if damage == "garbage":
        path.write_bytes(b"DIRC" + os.urandom(200))
    elif damage == "truncated":
        path.write_bytes(decoy.read_bytes()[:40])
    elif damage == "symlink":
        os.symlink(decoy, path)
    else:
        path.mkdir()
    write(wt, "new.txt", "new\n")
    tip = git(repo, "rev-parse", "scaffold/task-1")
    expected = fresh_tree(wt, tip, tmp_path)
    new = ws.commit_all(TASK, "work")
    assert new is not None
    assert git(repo, "rev-parse", f"{new}^{{tree}}") == expected
    assert git(wt, "status", "--porcelain") == ""


def test_removing_the_worktree_forgets_its_saved_index(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    ws = Workspace(repo)
    ws.create_worktree(TASK)
    ws.create_worktree("TASK-2")
    assert [p.name.split("-")[1] for p in saved(repo)] == ["1", "2"]
    ws.remove_worktree(TASK)
    assert [p.name.split("-")[1] for p in saved(repo)] == ["2"]


# ------------------------------------------------------------------ the index format


def index_of(repo: Path) -> bytes:
    return (repo / ".git" / "index").read_bytes()


def test_smudging_sets_recent_sizes_to_zero_and_git_reads_the_result(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    write(repo, "deep/er/file.txt", "x" * 100)
    git(repo, "add", "-A")
    data = index_of(repo)
    out = tmp_path / "index"
    out.write_bytes(smudge_recent(data, 0, 20) or b"")
    assert set(sizes(out, repo).values()) == {0}
    # Nothing recent enough: the same bytes (the checksum made anew is the same).
    assert smudge_recent(data, int(time.time()) + 100, 20) == data


def test_smudging_reads_version_3_entries(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    write(repo, "later.txt", "intent to add\n")
    git(repo, "add", "-N", "later.txt")  # an extended flag: the index is version 3
    data = index_of(repo)
    assert int.from_bytes(data[4:8], "big") == 3
    out = tmp_path / "index"
    out.write_bytes(smudge_recent(data, 0, 20) or b"")
    assert sizes(out, repo) == {"README.md": 0, "later.txt": 0, "lines.txt": 0}


def test_smudging_a_sha256_repository(tmp_path: Path) -> None:
    repo = tmp_path / "r256"
    repo.mkdir()
    git(repo, "init", "-q", "--object-format=sha256")
    write(repo, "a.txt", "a\n")
    git(repo, "add", "-A")
    out = tmp_path / "index"
    out.write_bytes(smudge_recent(index_of(repo), 0, 32) or b"")
    assert sizes(out, repo) == {"a.txt": 0}


def test_what_cannot_be_read_is_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "r")
    data = index_of(repo)
    bad_sum = data[:-1] + bytes([data[-1] ^ 1])
    v4 = bytearray(data)
    v4[4:8] = (4).to_bytes(4, "big")
    v4[-20:] = hashlib.sha1(bytes(v4[:-20])).digest()
    many = bytearray(data)
    many[8:12] = (10_000).to_bytes(4, "big")
    many[-20:] = hashlib.sha1(bytes(many[:-20])).digest()
    for bad in (b"", b"DIRC", b"XXXX" + data[4:], bad_sum, bytes(v4), bytes(many), data[:60]):
        assert smudge_recent(bad, 0, 20) is None
    assert smudge_recent(data, 0, 21) is None
