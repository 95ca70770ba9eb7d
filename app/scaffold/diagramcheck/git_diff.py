"""The real diff between two commits, and the blobs on both sides of it.

Everything goes through argv lists (no shell). Both revisions, their trees and their
merge base come from one ``git rev-parse`` (:func:`rev_parse_args`). The change list
comes from one ``git diff --raw -z -M`` between the merge base and the head (what a pull request
shows); the blob ids it prints are read back through a single
``git cat-file --batch`` process, so a diff of thousands of files costs a handful
of processes, not two per file. Blob ids, not ``<rev>:<path>`` names, go to
``cat-file``, so any file name (spaces, newlines, non-ASCII) is read correctly.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scaffold.errors import GitError, UsageError
from scaffold.git.environment import GIT, git_env
from scaffold.git.runner import run_git

NULL_SHA = "0" * 40

# The smallest buffer a pipe has (one page, when the user's pipe pages run short).
_PIPE_MIN = 4096

SYMLINK_MODE = "120000"
SUBMODULE_MODE = "160000"

# A ref the user typed: no option-looking or control-character input reaches git.
MAX_REF = 512


def is_bad_ref(ref: str) -> bool:
    """Empty, option-looking, too long, or holding a control character or a space."""
    return (
        not ref
        or ref.startswith("-")
        or len(ref) > MAX_REF
        or any(c <= " " or c == "\x7f" for c in ref)
    )


def is_sha(text: str) -> bool:
    """A full object id (SHA-1 or SHA-256)."""
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


@dataclass(frozen=True)
class Resolved:
    """What one ``git rev-parse`` (:func:`rev_parse_args`) resolves: both commits (full ids), their trees, the merge base (``None``: left to ``git
    merge-base``) and the git (common) directory."""

    base: str
    head: str
    base_tree: str
    head_tree: str
    merge_base: str | None
    git_dir: str


def rev_parse_args(base: str, head: str) -> list[str]:
    """The ``rev-parse`` arguments (after ``git``) for :func:`parse_rev_parse`."""
    b, h = f"{base}^{{commit}}", f"{head}^{{commit}}"
    # ``b...h`` prints h, b and ``^<merge base>`` for each merge base.
    spec = [b, h, f"{base}^{{tree}}", f"{head}^{{tree}}", f"{b}...{h}"]
    return ["rev-parse", "--git-common-dir", *spec, "--"]


def parse_rev_parse(stdout: str, returncode: int, cwd: str) -> Resolved | None:
    """What :func:`rev_parse_args` printed, run in ``cwd``; ``None`` when that is not
    plainly two commits (then each is resolved on its own, with its own error)."""
    lines = stdout.splitlines()
    if returncode != 0 or not lines:
        return None
    shas = [line for line in lines[1:] if line not in ("--", "--end-of-options")]
    if not lines or len(shas) < 4 or not all(is_sha(x) for x in shas[:4]):
        return None
    git_dir = lines[0] if os.path.isabs(lines[0]) else os.path.join(cwd, lines[0])
    rest = shas[4:]
    bases = [x[1:] for x in rest[2:] if x.startswith("^")]
    mb = (
        bases[0]
        if rest[:2] == [shas[1], shas[0]]
        and len(rest) == 3
        and len(bases) == 1
        and is_sha(bases[0])
        else None
    )
    return Resolved(shas[0], shas[1], shas[2], shas[3], mb, git_dir)


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
    """Refuse revisions that are empty, look like options or hold control characters.

    Git validates the rest (``rev-parse --verify``); this keeps odd input from
    ever reaching it as something other than a revision.
    """
    if is_bad_ref(ref):
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
        if letter in ("R", "C"):
            if i + 2 >= len(fields):
                raise ValueError(f"truncated {letter} record")
            old_path: str | None = fields[i + 1]
            path = fields[i + 2]
            i += 3
        else:
            if i + 1 >= len(fields):
                raise ValueError(f"truncated {letter} record")
            old_path, path = None, fields[i + 1]
            i += 2
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
    """One ``git cat-file --batch`` process answering many object lookups.

    Use as a context manager. :meth:`read_many` writes every request from a
    thread while the caller reads the answers, so the pipes never fill up.
    Names may be blob ids or ``<commit>:<path>``; a name git cannot find reads
    as ``None``.
    """

    def __init__(self, repo: Path) -> None:
        self.repo = repo
        self._proc: subprocess.Popen[bytes] | None = None

    def __enter__(self) -> BlobReader:
        try:
            self._proc = subprocess.Popen(
                [GIT, "cat-file", "--batch"],
                cwd=self.repo,
                env=git_env(),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                stderr=subprocess.DEVNULL,
            )
        except OSError as exc:
            raise GitError(["cat-file", "--batch"], -1, f"cannot run git: {exc}") from exc
        return self

    def __exit__(self, *exc: object) -> None:
        proc = self._proc
        self._proc = None
        if proc is None:
            return
        if proc.stdin is not None:
            with contextlib.suppress(OSError):
                proc.stdin.close()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        if proc.stdout is not None:
            proc.stdout.close()

    def read_many(self, names: Sequence[str]) -> list[bytes | None]:
        return [found[1] if found is not None else None for found in self.read_many_ids(names)]

    def read_many_ids(self, names: Sequence[str]) -> list[tuple[str, bytes] | None]:
        """Like :meth:`read_many`, with each blob's id (from git's answer: no hashing)."""
        proc = self._proc
        if proc is None or proc.stdin is None or proc.stdout is None:
            raise RuntimeError("BlobReader used outside its context")
        for name in names:
            if "\n" in name or "\0" in name:
                raise ValueError(f"object name with a newline: {name!r}")
        payload = b"".join(n.encode("utf-8", "surrogateescape") + b"\n" for n in names)
        stdin = proc.stdin
        errors: list[BaseException] = []

        def feed() -> None:
            try:
                stdin.write(payload)
                stdin.flush()
            except (OSError, ValueError) as exc:  # pragma: no cover - git died
                errors.append(exc)

        if len(payload) <= _PIPE_MIN:
            # git has answered (and so read) every earlier name: the pipe is empty, and
            # this fits in it whatever git does meanwhile. No thread needed.
            feed()
            writer = None
        else:
            writer = threading.Thread(target=feed, daemon=True)
            writer.start()
        out = proc.stdout
        results: list[tuple[str, bytes] | None] = []
        for name in names:
            header = out.readline()
            if not header:
                if writer is not None:
                    writer.join()
                raise GitError(
                    ["cat-file", "--batch"], proc.poll() or -1, f"git stopped answering at {name!r}"
                )
            parts = header.rstrip(b"\n").split(b" ")
            if len(parts) == 2 and parts[1] in (b"missing", b"ambiguous"):
                results.append(None)
                continue
            if len(parts) != 3:
                if writer is not None:
                    writer.join()
                raise GitError(["cat-file", "--batch"], -1, f"bad header {header!r}")
            size = int(parts[2])
            data = out.read(size)
            out.read(1)  # the newline after the content
            results.append((parts[0].decode("ascii"), data) if parts[1] == b"blob" else None)
        if writer is not None:
            writer.join()
        if errors:  # pragma: no cover
            raise GitError(["cat-file", "--batch"], -1, str(errors[0]))
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


def decode_text(data: bytes) -> str | None:
    """The text of a blob, or ``None`` when it is binary (a NUL byte) or not UTF-8."""
    if b"\0" in data[:8000]:
        return None
    try:
        return data.decode("utf-8-sig")
    except UnicodeDecodeError:
        return None
