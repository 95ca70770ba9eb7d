"""The real diff between two commits, and the blobs on both sides of it.

Everything goes through argv lists (no shell). The change list comes from one
``git diff --raw -z -M`` between the merge base and the head (what a pull request
shows); the blob ids it prints are read back through ``git cat-file --batch``, one
process per batch of names, so a diff of thousands of files costs a handful of
processes, not two per file. Blob ids, not ``<rev>:<path>`` names, go to
``cat-file``, so any file name (spaces, newlines, non-ASCII) is read correctly.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scaffold.errors import GitError, UsageError
from scaffold.git.environment import GIT, git_env
from scaffold.git.runner import run_git

NULL_SHA = "0" * 40

SYMLINK_MODE = "120000"
SUBMODULE_MODE = "160000"

# A ref the user typed: no option-looking or control-character input reaches git.
MAX_REF = 512


def is_sha(text: str) -> bool:
    """A full object id (SHA-1 or SHA-256)."""
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


@dataclass(frozen=True)
class RawChange:
    """One record of ``git diff --raw -z -M``.

    ``status`` is the letter (``A``, ``M``, ``D``, ``R``, ``C``, ``T``); for
    ``R``/``C`` ``old_path`` is the source. ``old_blob``/``new_blob`` are the blob
    ids (``None`` on the side where the file does not exist); modes say whether
    a side is a regular file, a symlink or a submodule.
    """

    status: str
    path: str
    old_path: str | None
    old_blob: str | None
    new_blob: str | None
    old_mode: str
    new_mode: str
    similarity: int | None = None

    @property
    def source_path(self) -> str:
        """The path on the old side (the same as ``path`` unless renamed or copied)."""
        return self.old_path if self.old_path is not None else self.path


def check_ref(ref: str) -> str:
    """Refuse revisions that are empty, look like options, are too long or hold a
    control character or a space.

    Git validates the rest (``rev-parse --verify``); this keeps odd input from
    ever reaching it as something other than a revision.
    """
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
    if out.returncode != 0 or not is_sha(sha):
        raise UsageError(f"unknown revision {ref!r} in {repo}")
    return sha


def merge_base(repo: Path, base: str, head: str) -> str:
    """The merge base of two commits (what a pull request diffs against)."""
    out = run_git(["merge-base", base, head], repo, check=False)
    sha = out.stdout.strip().splitlines()[0] if out.stdout.strip() else ""
    if out.returncode != 0 or not is_sha(sha):
        raise UsageError(f"{base[:12]} and {head[:12]} have no common history")
    return sha


def parse_raw_z(output: str) -> list[RawChange]:
    """Parse ``git diff --raw -z --no-abbrev`` output (with or without ``-M``)."""
    fields = output.split("\0")
    if fields and fields[-1] == "":
        fields.pop()
    changes: list[RawChange] = []
    i = 0
    while i < len(fields):
        meta = fields[i]
        if not meta.startswith(":"):
            raise ValueError(f"unexpected raw diff record {meta!r}")
        parts = meta[1:].split(" ")
        if len(parts) != 5:
            raise ValueError(f"unexpected raw diff record {meta!r}")
        old_mode, new_mode, old_sha, new_sha, status = parts
        letter, score = status[0], status[1:]
        paths = 2 if letter in ("R", "C") else 1  # a rename or copy: source, then path
        if i + paths >= len(fields):
            raise ValueError(f"truncated {letter} record")
        old_path = fields[i + 1] if paths == 2 else None
        path = fields[i + paths]
        i += paths + 1
        changes.append(
            RawChange(
                status=letter,
                path=path,
                old_path=old_path,
                old_blob=None if old_sha == NULL_SHA else old_sha,
                new_blob=None if new_sha == NULL_SHA else new_sha,
                old_mode=old_mode,
                new_mode=new_mode,
                similarity=int(score) if score.isdigit() else None,
            )
        )
    return changes


def diff_commits(repo: Path, old: str, new: str) -> list[RawChange]:
    """What changed from commit ``old`` to commit ``new``, renames detected."""
    out = run_git(
        [
            "diff",
            "--raw",
            "-z",
            "-M",
            "--no-abbrev",
            "--no-ext-diff",
            "--no-textconv",
            old,
            new,
            "--",
        ],
        repo,
    )
    return parse_raw_z(out.stdout)


class BlobReader:
    """Object lookups through ``git cat-file --batch``: one process per :meth:`read_many`.

    Names may be blob ids or ``<commit>:<path>``; a name git cannot find, or one that
    names no blob, reads as ``None``. A context manager, as callers hold one for a check.
    """

    def __init__(self, repo: Path) -> None:
        self.repo = repo

    def __enter__(self) -> BlobReader:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def read_many(self, names: Sequence[str]) -> list[bytes | None]:
        if not names:
            return []
        for name in names:
            if "\n" in name or "\0" in name:
                raise ValueError(f"object name with a newline: {name!r}")
        argv = ["cat-file", "--batch"]
        try:
            # communicate() writes and reads at once: the pipes never fill up.
            proc = subprocess.run(
                [GIT, *argv],
                cwd=self.repo,
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
            line = out[pos:end]
            header = line.split(b" ")
            pos = end + 1
            if len(header) == 2 and header[1] in (b"missing", b"ambiguous"):
                results.append(None)
                continue
            if len(header) != 3:
                raise GitError(argv, -1, f"bad header {line!r}")
            size = int(header[2])
            results.append(out[pos : pos + size] if header[1] == b"blob" else None)
            pos += size + 1  # the content, and the newline after it
        return results

    def read(self, name: str) -> bytes | None:
        return self.read_many([name])[0]


def list_tree(repo: Path, commit: str, prefixes: Sequence[str]) -> list[tuple[str, str]]:
    """``(path, blob)`` of every file under ``prefixes`` in ``commit`` (``ls-tree -r``)."""
    out = run_git(["ls-tree", "-r", "-z", "--full-tree", commit, "--", *prefixes], repo)
    found: list[tuple[str, str]] = []
    for record in out.stdout.split("\0"):
        if not record:
            continue
        meta, _, path = record.partition("\t")
        mode, kind, sha = meta.split(" ")
        if kind == "blob" and mode != SYMLINK_MODE:
            found.append((path, sha))
    return found


def decode_text(data: bytes | None) -> str | None:
    """The text of a blob, or ``None`` when there is none, or it is binary (a NUL byte)
    or not UTF-8."""
    if data is None or b"\0" in data[:8000]:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
