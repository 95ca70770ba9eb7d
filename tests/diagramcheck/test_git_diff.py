"""Reading the diff and the blobs from git, and the change-list parser."""

from __future__ import annotations

import pytest
from dcrepo import Repo

from scaffold.diagramcheck.git_diff import (
    check_ref,
    diff_commits,
    merge_base,
    read_blobs,
    resolve_commit,
)
from scaffold.errors import UsageError
from scaffold.git.changes import parse_raw_z

A, B = "1" * 40, "2" * 40
ZERO = "0" * 40


def test_parse_raw_z() -> None:
    out = (
        f":000000 100644 {ZERO} {B} A\0new.py\0"
        f":100644 100644 {A} {B} R087\0old.py\0moved.py\0"
        f":100644 000000 {A} {ZERO} D\0gone.py\0"
    )
    added, moved, gone = parse_raw_z(out)
    assert (added.status, added.path, added.old_blob, added.new_blob) == ("A", "new.py", None, B)
    assert (moved.status, moved.old_path, moved.path) == ("R", "old.py", "moved.py")
    assert moved.source_path == "old.py"
    assert (gone.new_blob, gone.old_blob) == (None, A)
    assert parse_raw_z("") == []
    with pytest.raises(ValueError):
        parse_raw_z(f":100644 100644 {A} {B} R100\0only-one\0")


def test_check_ref() -> None:
    for ok in ("main", "HEAD~3", "origin/main", "v1.0^", "a" * 40, "@"):
        assert check_ref(ok) == ok
    for bad in ("", "-x", "--upload-pack=evil", "a b", "a\nb", "x" * 600):
        with pytest.raises(UsageError):
            check_ref(bad)


def test_blobs_and_odd_names(repo: Repo) -> None:
    base = repo.head()
    odd = "app/pkg/new\nline ü.py"
    repo.write(odd, "X = 'odd'\n")
    repo.write("app/pkg/big.py", "Y = 1\n" * 50_000)
    head = repo.commit("odd")
    changes = diff_commits(repo.root, base, head)
    assert sorted(c.path for c in changes) == sorted([odd, "app/pkg/big.py"])
    names = [c.new_blob or "" for c in changes] + ["0" * 40, f"{head}:nope", head]
    blobs = read_blobs(repo.root, names)
    assert sorted(len(b or b"") for b in blobs[:2]) == [len("X = 'odd'\n"), 6 * 50_000]
    assert blobs[2:] == [None, None, None]  # missing, missing, a commit (not a blob)
    assert merge_base(repo.root, base, head) == base
    assert resolve_commit(repo.root, "HEAD~1") == base
    with pytest.raises(UsageError):
        resolve_commit(repo.root, "HEAD~99")
