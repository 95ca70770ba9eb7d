"""Loose blobs read from the object store are what git reads; anything else goes to git."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from dcrepo import Repo

from scaffold.diagramcheck import loose_objects
from scaffold.diagramcheck.git_diff import BlobReader


def _blobs(repo: Repo) -> list[str]:
    listing = repo.git("ls-tree", "-r", "HEAD").splitlines()
    return [line.split()[2] for line in listing]


def _objects(repo: Repo) -> str:
    found = loose_objects.objects_dir(str(repo.root / ".git"))
    assert found is not None
    return found


def test_loose_blobs_read_here_are_what_git_reads(repo: Repo) -> None:
    repo.write("app/pkg/a.py", "X = 1\n")
    repo.write("app/pkg/data.bin", bytes(range(256)) * 40)
    repo.write("app/pkg/empty.py", "")
    repo.commit("files")
    blobs = _blobs(repo)
    objects = _objects(repo)
    with BlobReader(repo.root) as reader:
        by_git = reader.read_many(blobs)
        assert all(loose_objects.read_loose(objects, b) is not None for b in blobs)
        assert loose_objects.read_blobs(reader, objects, blobs) == by_git
        missing = ["0" * 40, "not-a-sha", "HEAD:README.md"]
        assert [loose_objects.read_loose(objects, m) for m in missing] == [None, None, None]
        assert loose_objects.read_blobs(reader, objects, [*missing, blobs[0]]) == (
            reader.read_many([*missing, blobs[0]])
        )


def test_packed_or_damaged_objects_are_read_by_git(repo: Repo) -> None:
    repo.write("app/pkg/a.py", "X = 1\n")
    repo.write("app/pkg/b.py", "Y = 2\n")
    repo.commit("files")
    blobs = _blobs(repo)
    objects = _objects(repo)
    with BlobReader(repo.root) as reader:
        by_git = reader.read_many(blobs)
    damaged = Path(objects) / blobs[0][:2] / blobs[0][2:]
    os.chmod(damaged, 0o644)
    good = damaged.read_bytes()
    damaged.write_bytes(good[:-4])  # torn: does not inflate
    assert loose_objects.read_loose(objects, blobs[0]) is None
    damaged.write_bytes(good)
    repo.git("gc", "-q", "--prune=now")  # everything packed: no loose file left
    assert all(loose_objects.read_loose(objects, b) is None for b in blobs)
    with BlobReader(repo.root) as reader:
        assert loose_objects.read_blobs(reader, objects, blobs) == by_git


def test_replace_refs_leave_every_object_to_git(repo: Repo) -> None:
    repo.write("app/pkg/a.py", "X = 1\n")
    repo.write("app/pkg/b.py", "Y = 2\n")
    repo.commit("files")
    a, b = (repo.git("rev-parse", f"HEAD:app/pkg/{n}.py") for n in ("a", "b"))
    git_dir = str(repo.root / ".git")
    assert loose_objects.objects_dir(git_dir) is not None
    repo.git("replace", a, b)  # git now reads b's content for a
    assert loose_objects.objects_dir(git_dir) is None
    repo.git("pack-refs", "--all")  # the replace ref in packed-refs only
    assert not any((repo.root / ".git" / "refs" / "replace").iterdir())
    assert loose_objects.objects_dir(git_dir) is None
    with BlobReader(repo.root) as reader:
        assert reader.read_many([a]) == [b"Y = 2\n"]


def test_a_check_reads_the_same_loose_or_packed(
    repo: Repo, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scaffold.diagramcheck import parse_workers

    monkeypatch.setenv("SCAFFOLD_DIAGRAMCHECK_CACHE", "0")
    monkeypatch.setattr(parse_workers, "PARALLEL_MIN_FILES", 10)
    monkeypatch.setattr(parse_workers, "_can_fork", lambda: True)
    base = repo.head()
    for i in range(30):
        repo.write(
            f"app/pkg/m{i}.py",
            f"from dataclasses import dataclass\n\n\n@dataclass\nclass M{i}:\n    x: int\n",
        )
    repo.commit("models")
    loose = repo.check(base)
    assert loose.findings
    repo.git("gc", "-q", "--prune=now")
    assert repo.check(base) == loose
