"""Re-reading the backlog sees what is on disk now: the config's problems on every read,
a task file someone replaced right after scaffold wrote it."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from harness import rewrite_keeping_stat
from scaffold import backlog as bl
from scaffold import fsutil
from scaffold.backlog import config as cfg


def test_problems_are_reported_on_every_read_and_cannot_be_changed_by_a_caller(
    tmp_path: Path,
) -> None:
    (tmp_path / "config.yml").write_text("- not\n- a mapping\n", encoding="utf-8")
    _, problems = cfg.load_config(tmp_path)
    assert problems == ["config is not a mapping of keys to values; using the defaults"]
    problems.clear()
    _, again = cfg.load_config(tmp_path)
    assert again == ["config is not a mapping of keys to values; using the defaults"]


def test_a_missing_or_odd_config_means_the_defaults(tmp_path: Path) -> None:
    assert cfg.load_config(tmp_path) == (cfg.BacklogConfig(), [])
    (tmp_path / "config.yml").mkdir()
    assert cfg.load_config(tmp_path) == (cfg.BacklogConfig(), [])


def _repo(tmp_path: Path) -> Path:
    backlog = tmp_path / "backlog"
    (backlog / "tasks").mkdir(parents=True)
    (backlog / "config.yml").write_text(
        'statuses: ["To Do", "In Progress", "Done"]\ntask_prefix: "task"\n', encoding="utf-8"
    )
    bl.create_task(tmp_path, "First", description="One.")
    bl.create_task(tmp_path, "Second", description="Two.")
    return tmp_path


def test_a_file_replaced_right_after_scaffold_wrote_it_is_read_anew(tmp_path: Path) -> None:
    """Even with the same size and mtime: the new file is another inode."""
    repo = _repo(tmp_path)
    path = bl.load_backlog(repo).get("TASK-1").path
    bl.update_task(path, status="In Progress")
    ours = path.stat()
    text = path.read_text(encoding="utf-8").replace("In Progress", "Done       ")
    assert len(text.encode()) == ours.st_size
    tmp = path.with_name("other-writer.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.utime(tmp, ns=(ours.st_atime_ns, ours.st_mtime_ns))
    os.replace(tmp, path)
    assert bl.load_backlog(repo).get("TASK-1").status == "Done"


def test_the_next_read_sees_scaffolds_own_edit(
    tmp_path: Path,
) -> None:
    """A read after scaffold's own edit sees the edit, and a task read twice is the same."""
    repo = _repo(tmp_path)
    path = bl.load_backlog(repo).get("TASK-2").path
    assert bl.load_backlog(repo).get("TASK-2") == bl.load_backlog(repo).get("TASK-2")
    bl.update_task(path, status="In Progress")
    assert bl.load_backlog(repo).get("TASK-2").status == "In Progress"


def test_an_in_place_edit_within_the_same_tick_is_seen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A file read right after it changed is not trusted to its stat: a second write in
    the same clock tick (same inode, size and time) is read on the next load. (The tick
    is made a minute long here: on a busy machine the read may come more than 10 ms after
    the write, and a real second write would then have another time.)"""
    monkeypatch.setattr(fsutil, "RACY_NS", 60_000_000_000)
    repo = _repo(tmp_path)
    path = bl.load_backlog(repo).get("TASK-1").path
    bl.update_task(path, status="In Progress")
    assert bl.load_backlog(repo).get("TASK-1").status == "In Progress"
    rewrite_keeping_stat(
        path, path.read_text(encoding="utf-8").replace("In Progress", "Done       ")
    )
    assert bl.load_backlog(repo).get("TASK-1").status == "Done"


def test_files_older_than_a_tick_are_read_once(tmp_path: Path) -> None:
    """Once every file is older than a clock tick, the snapshot is kept: an unchanged
    backlog is not read again (and a stat-preserving edit then is not seen: the limit)."""
    repo = _repo(tmp_path)
    path = bl.load_backlog(repo).get("TASK-1").path
    old_ns = path.stat().st_mtime_ns - 5_000_000_000
    for file in (repo / "backlog").rglob("*.*"):
        os.utime(file, ns=(old_ns, old_ns))
    first = bl.load_backlog(repo)
    assert bl.load_backlog(repo) is first
    rewrite_keeping_stat(path, path.read_text(encoding="utf-8").replace("To Do", "Done "))
    assert bl.load_backlog(repo) is first
