"""Blobs read straight from the object store when they are loose files.

A blob committed but not yet packed (the commits of a local branch, until ``git gc``)
is a zlib-compressed file ``objects/xx/yyyy...`` holding ``blob <size>\\0<content>``.
Reading and inflating it here costs well under half of asking ``git cat-file`` for it:
git does the same work, then writes the blob into a pipe this process reads back, one
object at a time. Anything else (a packed object, one in an alternate object store, a
file that does not inflate or is not a blob of the size its header says) is read
through git as before, and so is everything when the repository has replace refs
(``git cat-file`` follows them; a file read here would not).
"""

from __future__ import annotations

import os
import zlib

TYPE_CHECKING = False

if TYPE_CHECKING:
    from scaffold.diagramcheck.git_diff import BlobReader

_HEX = frozenset("0123456789abcdef")


def objects_dir(git_dir: str) -> str | None:
    """The object store to read loose blobs from, or ``None`` when git must answer for
    every object (replace refs, loose or packed, may stand in for a blob)."""
    try:
        with os.scandir(os.path.join(git_dir, "refs", "replace")) as entries:
            if any(True for _ in entries):
                return None
    except FileNotFoundError:
        pass
    except OSError:
        return None
    try:
        with open(os.path.join(git_dir, "packed-refs"), "rb") as fh:
            if b" refs/replace/" in fh.read():
                return None
    except FileNotFoundError:
        pass
    except OSError:
        return None
    return os.path.join(git_dir, "objects")


def read_loose(objects: str, blob: str) -> bytes | None:
    """The content of blob ``blob`` if it is a loose object in ``objects``, else ``None``."""
    if len(blob) not in (40, 64) or not _HEX.issuperset(blob):
        return None
    try:
        with open(os.path.join(objects, blob[:2], blob[2:]), "rb") as fh:
            raw = fh.read()
        data = zlib.decompress(raw)
    except (OSError, zlib.error):
        return None
    nul = data.find(b"\0", 0, 32)
    if nul < 0 or not data.startswith(b"blob "):
        return None
    size = data[5:nul]
    if not size.isdigit() or int(size) != len(data) - nul - 1:
        return None
    return data[nul + 1 :]


def read_blobs(reader: BlobReader, objects: str | None, blobs: list[str]) -> list[bytes | None]:
    """``reader.read_many(blobs)``, the loose ones read here (see above)."""
    if objects is None:
        return reader.read_many(blobs)
    found = [read_loose(objects, blob) for blob in blobs]
    missing = [blob for blob, data in zip(blobs, found, strict=True) if data is None]
    if missing:
        rest = iter(reader.read_many(missing))
        found = [data if data is not None else next(rest) for data in found]
    return found
