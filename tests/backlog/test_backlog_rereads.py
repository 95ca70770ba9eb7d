"""Re-reading the backlog parses only what changed: ``config.yml`` when it changed, and
no task file scaffold itself has just written (its parse is kept with the written file's
stat)."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scaffold import backlog as bl
from scaffold.backlog import config as cfg
from scaffold.backlog import format as fmt


def _count_parses(monkeypatch: pytest.MonkeyPatch) -> list[Path]:
    parsed: list[Path] = []
    real = cfg._parse_config_file

    def counting(path: Path) -> tuple[cfg.BacklogConfig, tuple[str, ...]]:
        parsed.append(path)
        return real(path)

    monkeypatch.setattr(cfg, "_parse_config_file", counting)
    return parsed


def test_an_unchanged_config_is_parsed_once_and_a_changed_one_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    parsed = _count_parses(monkeypatch)
    path = tmp_path / "config.yml"
    path.write_text('statuses: ["To Do", "Doing", "Done"]\n', encoding="utf-8")
    first, _ = cfg.load_config(tmp_path)
    again, _ = cfg.load_config(tmp_path)
    assert first.statuses == again.statuses == ("To Do", "Doing", "Done")
    assert len(parsed) == 1
    # Rewritten the way editors and scaffold do (a new file put in place): read again,
    # even with the same size and the mtime put back.
    before = path.stat()
    tmp = tmp_path / "config.tmp"
    tmp.write_text('statuses: ["To Do", "Busy!", "Done"]\n', encoding="utf-8")
    os.utime(tmp, ns=(before.st_atime_ns, before.st_mtime_ns))
    os.replace(tmp, path)
    changed, _ = cfg.load_config(tmp_path)
    assert changed.statuses == ("To Do", "Busy!", "Done")
    assert len(parsed) == 2


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


def test_a_task_file_scaffold_wrote_is_not_parsed_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    repo = _repo(tmp_path)
    path = bl.load_backlog(repo).get("TASK-1").path
    written = bl.set_status(path, "In Progress")
    parsed: list[Path] = []
    real = fmt.parse_task

    def counting(raw: str, where: Path, **kw: str) -> fmt.BacklogTask:
        parsed.append(where)
        return real(raw, where, **kw)

    monkeypatch.setattr(fmt, "parse_task", counting)
    task = bl.load_backlog(repo).get("TASK-1")
    assert parsed == []
    assert task == written
    assert task.status == "In Progress"
    # The same as parsing the file afresh.
    assert real(path.read_text(encoding="utf-8"), path, prefix="task", folder="tasks") == task


def test_a_file_replaced_right_after_scaffold_wrote_it_is_read_anew(tmp_path: Path) -> None:
    """Even with the same size and mtime: the new file is another inode."""
    repo = _repo(tmp_path)
    path = bl.load_backlog(repo).get("TASK-1").path
    bl.set_status(path, "In Progress")
    ours = path.stat()
    text = path.read_text(encoding="utf-8").replace("In Progress", "Done       ")
    assert len(text.encode()) == ours.st_size
    tmp = path.with_name("other-writer.tmp")
    tmp.write_text(text, encoding="utf-8")
    os.utime(tmp, ns=(ours.st_atime_ns, ours.st_mtime_ns))
    os.replace(tmp, path)
    assert bl.load_backlog(repo).get("TASK-1").status == "Done"
