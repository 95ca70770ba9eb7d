"""The walk ``commit_all`` keeps of a worktree, and when it may be trusted.

A walk is trusted only when every ``ctime`` in it is from a clock tick before the walk:
a change made later, even within the same tick as one before it, can then never give
back a recorded ``ctime``. The clock is replaced here to put the walk in that tick.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from gitrepo import write

import scaffold.git.worktree_snapshot as snapshots
from scaffold.git.worktree_snapshot import MAX_ENTRIES, scan, take


def newest_ctime(root: Path) -> int:
    return max(os.lstat(p).st_ctime_ns for p in [root, *root.rglob("*")])


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "wt"
    write(root, "a.txt", "a\n")
    write(root, "sub/b.txt", "b\n")
    os.symlink("a.txt", root / "link")
    (root / ".git").write_text("gitdir: /nowhere\n")
    return root


def at(monkeypatch: pytest.MonkeyPatch, clock_ns: int | None) -> None:
    monkeypatch.setattr(snapshots, "coarse_clock_ns", lambda: clock_ns)


def test_a_walk_within_the_tick_of_the_newest_change_is_not_kept(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    newest = newest_ctime(tree)
    at(monkeypatch, newest)
    assert take(tree) is None  # a change now could get this very ctime
    at(monkeypatch, newest - 1_000_000)
    assert take(tree) is None  # a clock behind the files: nothing is trusted
    at(monkeypatch, newest + 2_000_000)
    kept = take(tree)
    assert kept is not None
    assert kept.unchanged()


def test_an_extra_file_in_the_tick_counts_as_well(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pointer = write(tmp_path, "admin/gitdir", "x\n")
    newest = max(newest_ctime(tree), os.lstat(pointer).st_ctime_ns)
    at(monkeypatch, newest + 2_000_000)
    kept = take(tree, [pointer, tmp_path / "admin" / "config.worktree"])
    assert kept is not None
    assert kept.extras[tmp_path / "admin" / "config.worktree"] is None  # missing: noted so
    assert kept.unchanged()
    write(tmp_path, "admin/config.worktree", "")
    assert not kept.unchanged()
    at(monkeypatch, os.lstat(pointer).st_ctime_ns)
    assert take(tree, [pointer]) is None


def test_whole_second_times_are_trusted_only_a_step_later(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file system that keeps whole seconds (or two, as FAT) rounds a later change's
    ctime down: the walk must be a whole step after the newest one."""
    entries = scan(tree)
    assert entries is not None
    rounded = {k: (*v[:6], 10_000_000_000) for k, v in entries.items()}
    monkeypatch.setattr(snapshots, "scan", lambda *_a, **_k: dict(rounded))
    for clock, trusted in [
        (10_000_000_001, False),
        (11_500_000_000, False),  # 2 s steps (every time is even): still the same step
        (12_000_000_000, True),
    ]:
        at(monkeypatch, clock)
        assert (take(tree) is not None) is trusted, clock
    assert snapshots._granularity([3_000_000_000]) == 1_000_000_000
    assert snapshots._granularity([3_000_000_000, 5_000_000]) == 1_000_000
    assert snapshots._granularity([1_500_000, 7]) == 1


def test_every_kind_of_change_shows(tree: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    at(monkeypatch, newest_ctime(tree) + 2_000_000)
    changes = [
        lambda: (tree / "a.txt").write_text("A\n"),
        lambda: (tree / "sub" / "b.txt").chmod(0o700),
        lambda: os.rename(tree / "sub" / "b.txt", tree / "sub" / "c.txt"),
        (tree / "sub" / "new").mkdir,
        (tree / "link").unlink,
        lambda: os.link(tree / "a.txt", tree / "a2.txt"),
        lambda: (tree / ".git").write_text("gitdir: /elsewhere\n"),
    ]
    for change in changes:
        kept = take(tree)
        assert kept is not None
        change()
        assert not kept.unchanged()
        at(monkeypatch, newest_ctime(tree) + 2_000_000)


def test_the_git_pointer_is_listed_but_not_entered(tmp_path: Path) -> None:
    root = tmp_path / "wt"
    write(root, ".git/inside", "x\n")
    write(root, "sub/.git/inside", "nested repositories are walked\n")
    entries = scan(root)
    assert entries is not None
    assert ".git" in entries
    assert ".git/inside" not in entries
    assert "sub/.git/inside" in entries


def test_too_many_entries_or_an_unreadable_one_keeps_nothing(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert scan(tree, limit=3) is None
    assert scan(tree) is not None
    assert MAX_ENTRIES > 100
    assert scan(tree / "a.txt") is None  # not a folder
    assert scan(tree / "gone") is None
    at(monkeypatch, newest_ctime(tree) + 2_000_000)
    assert take(tree, [tree / "a.txt" / "below-a-file"]) is None  # ENOTDIR, not missing


def test_nothing_is_kept_where_the_clock_of_file_times_is_unknown(
    tree: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(snapshots.sys, "platform", "darwin")
    assert snapshots.coarse_clock_ns() is None
    assert take(tree) is None
