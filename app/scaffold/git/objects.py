"""Commit objects written by scaffold itself, without a ``git commit-tree`` process.

A loose object is ``<type> <size>\\0<content>``, zlib-compressed, stored by its hash
under ``objects/<2 hex>/<the rest>``: written to a temporary file in that folder, made
read-only and linked into place, the way git finalizes one. A commit's content is its
``tree``, ``parent`` lines, ``author`` and ``committer`` lines and, after a blank line,
the message, byte for byte what ``git commit-tree -F -`` writes for the same input.

Only where that is certain: a repository whose objects are SHA-1 or SHA-256, not
shared between users (``core.sharedRepository`` adjusts file modes), a message that is
UTF-8 without a NUL (git refuses a NUL and rewrites bytes that are not UTF-8), and dates
git would take as they are (``GIT_AUTHOR_DATE``/``GIT_COMMITTER_DATE`` unset, ISO 8601
or git's raw ``<seconds> <offset>``). Anywhere else :func:`commit_object` returns None
and the caller runs ``git commit-tree``.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
import os
import re
import tempfile
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from scaffold.git.runner import SAFE_LOCAL, run_git

_HEX = {"sha1": re.compile(r"[0-9a-f]{40}"), "sha256": re.compile(r"[0-9a-f]{64}")}
_RAW_DATE = re.compile(r"@?(\d{1,12}) ([+-])(\d\d)(\d\d)")
_BAD_IDENTITY = re.compile(r"[<>\n\0]")
# git's default for loose objects (core.looseCompression unset): fast, a little larger.
_LEVEL = 1


@dataclass(frozen=True)
class ObjectFormat:
    """What decides whether scaffold may write a repository's objects itself."""

    objects: Path  # the common directory's ``objects``
    algorithm: str | None  # "sha1" or "sha256"; None: leave writing to git


def object_format(objects: Path, config: Mapping[str, str]) -> ObjectFormat:
    """The format of the objects under ``objects``, from the repository's config
    (lower-case keys: ``extensions.objectformat``, ``core.sharedrepository``,
    ``i18n.commitencoding``)."""
    algorithm: str | None = config.get("extensions.objectformat", "sha1").lower()
    if algorithm not in _HEX:
        algorithm = None
    shared = config.get("core.sharedrepository", "false").lower()
    if shared not in ("false", "umask", "0", "no", "off", ""):
        algorithm = None
    encoding = config.get("i18n.commitencoding", "utf-8").lower().replace("_", "-")
    if encoding not in ("utf-8", "utf8"):
        algorithm = None
    return ObjectFormat(objects, algorithm)


_FORMAT_KEYS = r"^(extensions\.objectformat|core\.sharedrepository|i18n\.commitencoding)$"


def read_object_format(repo: Path, objects: Path) -> ObjectFormat:
    """:func:`object_format` from ``repo``'s config as git reads it (one ``git config``)."""
    out = run_git([*SAFE_LOCAL, "config", "-z", "--get-regexp", _FORMAT_KEYS], repo, check=False)
    if out.returncode not in (0, 1):  # 1: none of the keys is set
        return ObjectFormat(objects, None)
    config: dict[str, str] = {}
    for item in out.stdout.split("\0"):
        key, _, value = item.partition("\n")
        if key:
            config[key.lower()] = value
    return object_format(objects, config)


def signature(name: str, email: str, date: str | None, now: float | None = None) -> str | None:
    """``Name <email> <seconds> <+hhmm>`` as git writes it, for ``date`` (the
    ``GIT_*_DATE`` value) or now in the local time zone; None for a date whose
    reading is git's alone."""
    if _BAD_IDENTITY.search(name) or _BAD_IDENTITY.search(email) or not name or not email:
        return None
    if date is None:
        seconds = int(time.time() if now is None else now)
        offset = time.localtime(seconds).tm_gmtoff // 60
    else:
        parsed = _parse_date(date.strip())
        if parsed is None:
            return None
        seconds, offset = parsed
    sign = "-" if offset < 0 else "+"
    hours, minutes = divmod(abs(offset), 60)
    return f"{name} <{email}> {seconds} {sign}{hours:02d}{minutes:02d}"


def _parse_date(text: str) -> tuple[int, int] | None:
    """``(seconds, offset in minutes)`` of git's raw form or an ISO 8601 time with a zone."""
    raw = _RAW_DATE.fullmatch(text)
    if raw is not None:
        offset = int(raw.group(3)) * 60 + int(raw.group(4))
        return int(raw.group(1)), -offset if raw.group(2) == "-" else offset
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        return None
    utc_offset = moment.utcoffset()
    if utc_offset is None or utc_offset.seconds % 60 or moment.microsecond:
        return None
    return int(moment.timestamp()), int(utc_offset.total_seconds()) // 60


def commit_object(
    fmt: ObjectFormat,
    tree: str,
    parents: Sequence[str],
    message: str,
    identity: tuple[str, str],
    env: Mapping[str, str] | None = None,
) -> str | None:
    """Write the commit; its id, or None where ``git commit-tree`` must do it.

    ``message`` is written as it is (a final newline is the caller's); ``identity``
    is author and committer, with ``env``'s ``GIT_AUTHOR_DATE`` and
    ``GIT_COMMITTER_DATE`` (the process environment's when ``env`` is None)."""
    algorithm = fmt.algorithm
    if algorithm is None:
        return None
    hexes = _HEX[algorithm]
    if not all(hexes.fullmatch(sha) for sha in (tree, *parents)):
        return None
    dates = os.environ if env is None else env
    name, email = identity
    now = time.time()
    author = signature(name, email, dates.get("GIT_AUTHOR_DATE"), now)
    committer = signature(name, email, dates.get("GIT_COMMITTER_DATE"), now)
    if author is None or committer is None:
        return None
    try:
        text = message.encode("utf-8")
    except UnicodeEncodeError:
        return None  # git rewrites bytes that are not UTF-8 (with a warning): its call
    if b"\0" in text:
        return None  # git refuses a NUL in a message: its error, not a commit of ours
    lines = [f"tree {tree}", *(f"parent {p}" for p in parents)]
    lines += [f"author {author}", f"committer {committer}", ""]
    body = "\n".join(lines).encode() + b"\n" + text
    return write_object(fmt.objects, algorithm, "commit", body)


def write_object(objects: Path, algorithm: str, kind: str, data: bytes) -> str:
    """Store ``data`` as a loose object of ``kind``; its id. Raises OSError."""
    header = f"{kind} {len(data)}\0".encode()
    digest = hashlib.new(algorithm)
    digest.update(header)
    digest.update(data)
    sha = digest.hexdigest()
    folder = objects / sha[:2]
    final = folder / sha[2:]
    if os.path.exists(final):
        return sha
    folder.mkdir(exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix="tmp_obj_", dir=folder)
    try:
        with os.fdopen(fd, "wb") as out:
            out.write(zlib.compress(header + data, _LEVEL))
        os.chmod(tmp, 0o444)
        try:
            os.link(tmp, final)
        except FileExistsError:
            pass  # written meanwhile by git or another thread: the same bytes
        except OSError:
            os.replace(tmp, final)  # a file system without hard links
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
    return sha
