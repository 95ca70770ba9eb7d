"""The mount plan as data: the most specific rule wins, whatever the order rules came in."""

from __future__ import annotations

import pytest

from scaffold.sandbox.mounts import View, mount_args

DIRS = {"/home/u", "/home/u/.venv", "/repo", "/repo/.scaffold", "/repo/.scaffold/wt", "/tmp"}
FILES = {"/etc/key.pem", "/repo/.scaffold/wt/.git"}


def _args(view: View) -> list[str]:
    return mount_args(
        view,
        exists=lambda p: p in DIRS or p in FILES,
        is_dir=lambda p: p in DIRS,
    )


def test_deeper_rules_win_and_come_later() -> None:
    view = View().rw("/repo/.scaffold/wt").deny("/repo/.scaffold").ro("/repo")
    assert view.access("/repo/README.md") == "ro"
    assert view.access("/repo/.scaffold/journal") == "deny"
    assert view.access("/repo/.scaffold/wt/x.py") == "rw"
    assert view.access("/usr/bin/git") == "ro"  # the root is the host's, read-only
    args = _args(view)
    assert args.index("/repo/.scaffold") < args.index("--bind")  # tmpfs first, bind on top
    assert args[:3] == ["--ro-bind", "/repo", "/repo"]


def test_hidden_folders_become_read_only_after_their_mount_points_exist() -> None:
    args = _args(View().deny("/repo/.scaffold").rw("/repo/.scaffold/wt"))
    assert args == [
        "--tmpfs",
        "/repo/.scaffold",
        "--bind",
        "/repo/.scaffold/wt",
        "/repo/.scaffold/wt",
        "--remount-ro",
        "/repo/.scaffold",
    ]


def test_scratch_is_writable_and_a_hidden_file_is_dev_null() -> None:
    view = View().scratch("/tmp").deny("/etc/key.pem")
    assert view.access("/tmp/anything") == "scratch"
    assert view.access("/etc/key.pem") == "deny"
    assert _args(view) == ["--tmpfs", "/tmp", "--ro-bind", "/dev/null", "/etc/key.pem"]


def test_nothing_to_hide_under_a_hidden_folder_and_absent_paths_are_skipped() -> None:
    view = View().deny("/home/u", "/home/u/.venv/secret", "/nope")
    assert _args(view) == ["--tmpfs", "/home/u", "--remount-ro", "/home/u"]


def test_a_program_under_a_hidden_home_is_bound_back_read_only() -> None:
    view = View().deny("/home/u").ro("/home/u/.venv")
    assert view.access("/home/u/.venv/bin/python") == "ro"
    assert view.access("/home/u/.ssh/id_ed25519") == "deny"
    assert "--ro-bind" in _args(view)


def test_map_binds_another_folder_read_only() -> None:
    args = _args(View().deny("/tmp").map("/tmp/channel", "/var/lib/run-42"))
    assert args[2:5] == ["--ro-bind", "/var/lib/run-42", "/tmp/channel"]


def test_relative_paths_are_refused() -> None:
    with pytest.raises(ValueError, match="absolute"):
        View().rw("relative/path")
