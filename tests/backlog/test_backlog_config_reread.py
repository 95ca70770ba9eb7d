"""``load_config`` parses ``config.yml`` again only when the file changed."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scaffold.backlog import config as cfg


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
