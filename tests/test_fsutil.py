"""fsutil.write_file: whole files or nothing, and no temp file left behind."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from scaffold import fsutil
from scaffold.fsutil import leftover_temps, write_file


def test_a_write_replaces_the_file_and_leaves_no_temp_file(tmp_path: Path) -> None:
    target = tmp_path / "a.json"
    target.write_bytes(b"old")
    written = write_file(target, b"new", mode=0o600)
    assert target.read_bytes() == b"new"
    assert written.st_size == 3
    assert os.stat(target).st_mode & 0o777 == 0o600
    assert os.listdir(tmp_path) == ["a.json"]


def test_an_exclusive_write_refuses_a_taken_name(tmp_path: Path) -> None:
    target = tmp_path / "task-1.md"
    write_file(target, b"first", exclusive=True)
    with pytest.raises(FileExistsError):
        write_file(target, b"second", exclusive=True)
    assert target.read_bytes() == b"first"
    assert os.listdir(tmp_path) == ["task-1.md"]


def test_a_failed_write_keeps_the_old_file_and_removes_its_temp_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "quest.json"
    target.write_bytes(b"old")

    def no_room(fd: int) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(fsutil.os, "fsync", no_room)
    with pytest.raises(OSError):
        write_file(target, b"new")
    assert target.read_bytes() == b"old"
    assert leftover_temps(target) == []
    assert os.listdir(tmp_path) == ["quest.json"]


def test_leftover_temps_names_only_the_files_own_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "quest.json"
    left = tmp_path / ".quest.json.123.abcd.tmp"
    left.write_bytes(b"")
    (tmp_path / ".other.json.1.ab.tmp").write_bytes(b"")
    assert leftover_temps(target) == [left]
