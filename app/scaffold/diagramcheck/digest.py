"""Digests for cache names and keys, and the identity of DiagramCheck's code.

No imports beyond ``os`` and ``sys``: a check answered from the cache starts here.
"""

from __future__ import annotations

import os
import sys

# ``typing`` costs milliseconds of a check answered from the cache: not at run time.
TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Protocol
else:
    Protocol = object


class Digest(Protocol):
    def update(self, data: bytes, /) -> None: ...

    def hexdigest(self) -> str: ...


def sha1(data: bytes = b"") -> Digest:
    """A SHA-1 (for names, not security) from CPython's own ``_sha1`` when it is there:
    ``hashlib`` loads OpenSSL, milliseconds of a check answered from the cache."""
    import importlib

    try:
        impl = importlib.import_module("_sha1").sha1
    except ImportError:  # another Python
        import hashlib

        impl = hashlib.sha1
    digest: Digest = impl(data, usedforsecurity=False)
    return digest


_PACKAGE = os.path.dirname(os.path.abspath(__file__))
# Besides the package itself: the command line that prints a report, and how git runs.
_ALSO = (
    os.path.join(os.path.dirname(_PACKAGE), "cli", "entry.py"),
    os.path.join(os.path.dirname(_PACKAGE), "git", "environment.py"),
    os.path.join(os.path.dirname(_PACKAGE), "git", "runner.py"),
)
_CODE_ID: list[str] = []


def code_id() -> str:
    """A digest of scaffold's version, Python's and DiagramCheck's code (each module's
    name, size and mtime): new code, new caches."""
    if not _CODE_ID:
        from scaffold import __version__

        h = sha1(f"{__version__}:{sys.version_info.major}.{sys.version_info.minor}".encode())
        with os.scandir(_PACKAGE) as entries:
            files = sorted(e.path for e in entries if e.name.endswith(".py"))
        for path in (*files, *_ALSO):
            try:
                st = os.stat(path)
            except OSError:
                h.update(f"{os.path.basename(path)}:-\n".encode())
                continue
            h.update(f"{os.path.basename(path)}:{st.st_size}:{st.st_mtime_ns}\n".encode())
        _CODE_ID.append(h.hexdigest()[:12])
    return _CODE_ID[0]
