"""Objects scaffold writes itself are the very objects git writes for the same input.

Each commit is written twice into the same repository: once by
:func:`scaffold.git.objects.commit_object`, once by ``git commit-tree`` with the same
tree, parents, message and dates. The ids must match, and git must read the object back
(``cat-file``, ``fsck``). Where the module cannot be sure (a shared repository, another
commit encoding, a date only git can read) it writes nothing and says so (None).
"""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Sequence
from pathlib import Path

import pytest
from gitrepo import commit_file, git, make_repo

from scaffold.git.objects import (
    ObjectFormat,
    commit_object,
    object_format,
    read_object_format,
    signature,
    write_object,
)

NAME, EMAIL = "scaffold", "scaffold@localhost"


def by_git(
    repo: Path, tree: str, parents: Sequence[str], message: str, dates: dict[str, str]
) -> str:
    argv = ["git", "-c", f"user.name={NAME}", "-c", f"user.email={EMAIL}", "commit-tree", tree]
    for parent in parents:
        argv += ["-p", parent]
    env = {**os.environ, **dates, "GIT_AUTHOR_NAME": NAME, "GIT_AUTHOR_EMAIL": EMAIL}
    env |= {"GIT_COMMITTER_NAME": NAME, "GIT_COMMITTER_EMAIL": EMAIL}
    proc = subprocess.run(
        [*argv, "-F", "-"],
        cwd=repo,
        input=message.encode(),
        capture_output=True,
        env=env,
        check=True,
    )
    return proc.stdout.decode().strip()


def fmt_of(repo: Path) -> ObjectFormat:
    fmt = read_object_format(repo, repo / ".git" / "objects")
    assert fmt.algorithm is not None
    return fmt


DATES = [
    {
        "GIT_AUTHOR_DATE": "2026-01-02T03:04:05+00:00",
        "GIT_COMMITTER_DATE": "2026-01-02T03:04:05+00:00",
    },
    {"GIT_AUTHOR_DATE": "1767322800 +0530", "GIT_COMMITTER_DATE": "@1767322801 -0800"},
    {
        "GIT_AUTHOR_DATE": "2025-06-30T23:59:59-03:30",
        "GIT_COMMITTER_DATE": "2025-07-01T00:00:00+14:00",
    },
]
MESSAGES = ["scaffold: TASK-1 work\n", "no final newline", "ünïcödé ✓\n\nbody line\n", ""]


@pytest.mark.parametrize("dates", DATES)
@pytest.mark.parametrize("message", MESSAGES)
def test_commit_matches_commit_tree(tmp_path: Path, dates: dict[str, str], message: str) -> None:
    repo = make_repo(tmp_path / "repo")
    first = git(repo, "rev-parse", "HEAD")
    second = commit_file(repo, "lines.txt", "changed\n")
    git(repo, "branch", "side", first)
    third = commit_file(repo, "new.txt", "x\n")
    tree = git(repo, "rev-parse", "HEAD^{tree}")
    for parents in ([], [third], [third, second, first]):
        ours = commit_object(fmt_of(repo), tree, parents, message, (NAME, EMAIL), dates)
        assert ours == by_git(repo, tree, parents, message, dates)
        assert git(repo, "cat-file", "-t", ours or "") == "commit"
    git(repo, "fsck", "--strict", "--no-dangling")


def test_sha256_repository(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    git(repo, "init", "-q", "--object-format=sha256", "-b", "main")
    head = commit_file(repo, "a.txt", "a\n")
    tree = git(repo, "rev-parse", "HEAD^{tree}")
    fmt = fmt_of(repo)
    assert fmt.algorithm == "sha256"
    ours = commit_object(fmt, tree, [head], "m\n", (NAME, EMAIL), DATES[0])
    assert ours is not None
    assert len(ours) == 64
    assert ours == by_git(repo, tree, [head], "m\n", DATES[0])
    blob = write_object(fmt.objects, "sha256", "blob", b"state\n")
    (tmp_path / "state").write_bytes(b"state\n")
    assert blob == git(repo, "hash-object", str(tmp_path / "state"))
    assert git(repo, "cat-file", "blob", blob) == "state"
    git(repo, "fsck", "--strict", "--no-dangling")


def test_blob_matches_hash_object_and_is_read_only(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    data = b"\x00binary\xffdata\n" * 100
    sha = write_object(repo / ".git" / "objects", "sha1", "blob", data)
    src = tmp_path / "data.bin"
    src.write_bytes(data)
    assert sha == git(repo, "hash-object", str(src))
    path = repo / ".git" / "objects" / sha[:2] / sha[2:]
    assert stat.S_IMODE(path.stat().st_mode) == 0o444
    # Written again (by a second thread, or git): the same file, no temporary left.
    assert write_object(repo / ".git" / "objects", "sha1", "blob", data) == sha
    assert [p.name for p in path.parent.iterdir() if p.name.startswith("tmp_obj_")] == []


def test_now_is_the_local_time_with_its_offset(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    tree = git(repo, "rev-parse", "HEAD^{tree}")
    sha = commit_object(fmt_of(repo), tree, [], "now\n", (NAME, EMAIL), {})
    assert sha is not None
    line = next(
        x for x in git(repo, "cat-file", "commit", sha).splitlines() if x.startswith("author")
    )
    seconds, offset = line.split()[-2:]
    assert offset == signature(NAME, EMAIL, None, float(seconds)).split()[-1]  # type: ignore[union-attr]


@pytest.mark.parametrize(
    "config",
    [
        {"core.sharedrepository": "group"},
        {"core.sharedrepository": "0660"},
        {"i18n.commitencoding": "ISO-8859-1"},
        {"extensions.objectformat": "sha512"},
    ],
)
def test_repositories_it_leaves_to_git(tmp_path: Path, config: dict[str, str]) -> None:
    fmt = object_format(tmp_path, config)
    assert fmt.algorithm is None
    assert commit_object(fmt, "a" * 40, [], "m\n", (NAME, EMAIL), {}) is None


def test_config_is_read_as_git_reads_it(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    git(repo, "config", "core.sharedRepository", "group")
    assert read_object_format(repo, repo / ".git" / "objects").algorithm is None
    git(repo, "config", "core.sharedRepository", "false")
    git(repo, "config", "i18n.commitEncoding", "UTF-8")
    assert read_object_format(repo, repo / ".git" / "objects").algorithm == "sha1"


@pytest.mark.parametrize(
    ("date", "name", "email"),
    [
        ("yesterday", NAME, EMAIL),  # git's approxidate: git's alone
        ("2026-01-02T03:04:05", NAME, EMAIL),  # no zone: git would use the local one
        ("2026-01-02T03:04:05.5+00:00", NAME, EMAIL),
        (None, "evil <x@y>", EMAIL),
        (None, NAME, "a\nb"),
        (None, "", EMAIL),
    ],
)
def test_what_only_git_may_write(tmp_path: Path, date: str | None, name: str, email: str) -> None:
    repo = make_repo(tmp_path / "repo")
    tree = git(repo, "rev-parse", "HEAD^{tree}")
    dates = {"GIT_COMMITTER_DATE": date} if date else {}
    assert commit_object(fmt_of(repo), tree, [], "m\n", (name, email), dates) is None


def test_ids_that_are_not_hex_are_refused(tmp_path: Path) -> None:
    repo = make_repo(tmp_path / "repo")
    fmt = fmt_of(repo)
    tree = git(repo, "rev-parse", "HEAD^{tree}")
    assert commit_object(fmt, "HEAD", [], "m\n", (NAME, EMAIL), {}) is None
    assert commit_object(fmt, tree, ["main"], "m\n", (NAME, EMAIL), {}) is None
    assert commit_object(fmt, tree, [tree.upper()], "m\n", (NAME, EMAIL), {}) is None


def test_a_write_that_fails_leaves_the_commit_to_git(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No room or no permission in the object store: commit_all still commits, by git."""
    import scaffold.git.objects as objects
    from scaffold.git.worktrees import Workspace

    def full(*args: object) -> str:
        raise OSError(28, "No space left on device")

    repo = make_repo(tmp_path / "repo")
    ws = Workspace(repo)
    wt = ws.create_worktree("TASK-1")
    (wt / "a.txt").write_text("a\n")
    monkeypatch.setattr(objects, "write_object", full)
    sha = ws.commit_all("TASK-1", "work")
    assert sha is not None
    assert git(repo, "rev-parse", "scaffold/task-1") == sha
    assert git(repo, "show", f"{sha}:a.txt") == "a"
    assert (
        git(repo, "log", "-1", "--format=%an <%ae> %s", sha) == "scaffold <scaffold@localhost> work"
    )


@pytest.mark.parametrize("message", ["a\0b\n", "caf\udce9\n", "lone \ud800\n"])
def test_messages_git_would_refuse_or_rewrite_are_left_to_git(tmp_path: Path, message: str) -> None:
    """git refuses a NUL and rewrites bytes that are not UTF-8: never a commit of ours."""
    repo = make_repo(tmp_path / "repo")
    tree = git(repo, "rev-parse", "HEAD^{tree}")
    assert commit_object(fmt_of(repo), tree, [], message, (NAME, EMAIL), DATES[0]) is None
