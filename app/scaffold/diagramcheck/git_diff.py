"""The real diff between two commits, and the blobs on both sides of it.

Everything goes through argv lists (no shell). The change list comes from one
``git diff --raw -z -M`` between the merge base and the head (what a pull request
shows); the blob ids it prints are read back through one ``git cat-file --batch``
per batch of names, so a diff of thousands of files costs a handful of processes.
Blob ids, not ``<rev>:<path>`` names, go to ``cat-file``, so any file name is read
correctly.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from pathlib import Path

from scaffold.errors import GitError, UsageError
from scaffold.git.changes import FileChange, parse_raw_z
from scaffold.git.environment import GIT, git_env
from scaffold.git.runner import run_git

SYMLINK_MODE = "120000"
SUBMODULE_MODE = "160000"

# A ref the user typed: no option-looking or control-character input reaches git.
MAX_REF = 512


def _is_sha(text: str) -> bool:
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


def check_ref(ref: str) -> str:
    """Refuse revisions that are empty, look like options, are too long or hold a
    control character or a space (git's ``rev-parse --verify`` checks the rest)."""
    if (
        not ref
        or ref.startswith("-")
        or len(ref) > MAX_REF
        or any(c <= " " or c == "\x7f" for c in ref)
    ):
        raise UsageError(f"not a valid git revision: {ref!r}")
    return ref


def resolve_commit(repo: Path, ref: str) -> str:
    """The full commit id ``ref`` names; :class:`UsageError` when it names none."""
    check_ref(ref)
    out = run_git(
        ["rev-parse", "--verify", "--quiet", "--end-of-options", f"{ref}^{{commit}}"],
        repo,
        check=False,
    )
    sha = out.stdout.strip()
    if out.returncode != 0 or not _is_sha(sha):
        raise UsageError(f"unknown revision {ref!r} in {repo}")
    return sha


def merge_base(repo: Path, base: str, head: str) -> str:
    """The merge base of two commits (what a pull request diffs against)."""
    out = run_git(["merge-base", base, head], repo, check=False)
    sha = out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""
    if out.returncode != 0 or not _is_sha(sha):
        raise UsageError(f"{base[:12]} and {head[:12]} have no common history")
    return sha


def diff_commits(repo: Path, old: str, new: str) -> list[FileChange]:
    """What changed from commit ``old`` to commit ``new``, renames detected."""
    argv = ["diff", "--raw", "-z", "-M", "--no-abbrev", "--no-ext-diff", "--no-textconv"]
    return parse_raw_z(run_git([*argv, old, new, "--"], repo).stdout)


def read_blobs(repo: Path, names: Sequence[str]) -> list[bytes | None]:
    """The blobs ``names`` (blob ids or ``<commit>:<path>``) name, through one
    ``git cat-file --batch``; a name git cannot find, or one that names no blob, is ``None``.
    """
    if not names:
        return []
    for name in names:
        if "\n" in name or "\0" in name:
            raise ValueError(f"object name with a newline: {name!r}")
    argv = ["cat-file", "--batch"]
    try:
        # Binary output whose sizes count bytes: run_git's text mode would not do.
        proc = subprocess.run(
            [GIT, *argv],
            cwd=repo,
            env=git_env(),
            input=b"".join(n.encode("utf-8", "surrogateescape") + b"\n" for n in names),
            capture_output=True,
            check=False,
        )
    except OSError as exc:
        raise GitError(argv, -1, f"cannot run git: {exc}") from exc
    out = proc.stdout
    results: list[bytes | None] = []
    pos = 0
    for name in names:
        end = out.find(b"\n", pos)
        if end < 0:
            raise GitError(argv, proc.returncode, f"git stopped answering at {name!r}")
        line, pos = out[pos:end], end + 1
        header = line.split(b" ")
        if len(header) == 3:  # <sha> <type> <size>, then the content and a newline
            size = int(header[2])
            results.append(out[pos : pos + size] if header[1] == b"blob" else None)
            pos += size + 1
        elif len(header) == 2 and header[1] in (b"missing", b"ambiguous"):
            results.append(None)
        else:
            raise GitError(argv, -1, f"bad header {line!r}")
    return results


def list_tree(repo: Path, commit: str, prefixes: Sequence[str]) -> list[tuple[str, str]]:
    """``(path, blob)`` of every file under ``prefixes`` in ``commit`` (``ls-tree -r``)."""
    out = run_git(["ls-tree", "-r", "-z", "--full-tree", commit, "--", *prefixes], repo)
    found: list[tuple[str, str]] = []
    for record in filter(None, out.stdout.split("\0")):
        meta, _, path = record.partition("\t")
        mode, kind, sha = meta.split(" ")
        if kind == "blob" and mode != SYMLINK_MODE:
            found.append((path, sha))
    return found


def decode_text(data: bytes | None) -> str | None:
    """The text of a blob; ``None`` when there is none, or it is binary (a NUL byte) or
    not UTF-8."""
    if data is None or b"\0" in data[:8000]:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
