"""What DiagramCheck learnt, kept between runs.

A blob id names its content, so what :func:`~scaffold.diagramcheck.python_model.read_module`
found in a blob stays true: a re-check after a push parses only the blobs the push
added. A check's requirements and findings are kept by a digest of their inputs, so the
same check again is a lookup. Both live in two pickle files in the repository's own git
directory (``<git-common-dir>/scaffold/``), which no checked-out file, and so no pull
request, can write; DiagramCheck alone writes them. Their names carry the parser's
version, Python's and a digest of this package's files, so new code never reads an old
one's answers (and removes its files). A missing, unreadable or foreign file is an empty
cache; writing is best effort (atomic rename) and never fails a check.
``SCAFFOLD_DIAGRAMCHECK_CACHE=0`` turns it off.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import pickle
import sys
import tempfile
from pathlib import Path

from scaffold import __version__
from scaffold.diagramcheck.findings import Finding
from scaffold.diagramcheck.mermaid import DiagramIndex
from scaffold.diagramcheck.python_model import ModuleInfo
from scaffold.diagramcheck.rules import Requirement

# Raise when read_module's answers change shape or meaning.
PARSER_VERSION = 7
MAX_ENTRIES = 20_000
MAX_RESULTS = 64
# Read at every check: kept small (the newest entries win).
MAX_RESULTS_BYTES = 8_000_000
ENV_DISABLE = "SCAFFOLD_DIAGRAMCHECK_CACHE"


def code_id() -> str:
    """A digest of scaffold's version and DiagramCheck's code (each module's name, size
    and mtime): new code, new caches."""
    h = hashlib.sha1(__version__.encode(), usedforsecurity=False)
    for path in sorted(Path(__file__).parent.rglob("*.py")):
        st = path.stat()
        h.update(f"{path.name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
    return h.hexdigest()[:12]


def cache_file(git_dir: Path) -> Path:
    """The cache of this DiagramCheck: its name changes with the code that fills it."""
    py = f"{sys.version_info.major}{sys.version_info.minor}"
    return git_dir / "scaffold" / f"diagramcheck-v{PARSER_VERSION}-py{py}-{code_id()}.pickle"


class ParseCache:
    """The analyzer's memory between runs, in two files (or in memory only).

    ``modules``: ``blob id -> ModuleInfo``, each entry pickled on its own and unpickled
    when asked for, so a check pays for its own blobs, not for the whole file; the file
    is read only when a module is asked for. ``results``: what a diagram names (by path
    and blob id), what a diff required and what a check found (by the digest of their
    inputs), few and small, read at once.
    """

    def __init__(self, path: Path | None) -> None:
        self.path = path if os.environ.get(ENV_DISABLE, "1") != "0" else None
        self._entries: dict[str, bytes] | None = None if self.path is not None else {}
        self._loaded: dict[str, ModuleInfo] = {}
        self.results: dict[str, bytes] = {}
        self._modules_added = 0
        self._results_added = 0
        if self.path is not None:
            self.results = _load(results_file(self.path))

    # ------------------------------------------------------------------ results

    def _get(self, key: str) -> tuple[object, object] | None:
        raw = self.results.get(key)
        if raw is None:
            return None
        try:
            found = pickle.loads(raw)  # noqa: S301 - our own file in the git directory
        except Exception:  # a damaged entry is a miss
            return None
        if not (isinstance(found, tuple) and len(found) == 2):
            return None
        return (found[0], found[1])

    def _put(self, key: str, value: object) -> None:
        if key not in self.results:
            self.results[key] = pickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
            self._results_added += 1

    def get_diagram(self, key: str) -> tuple[DiagramIndex, str] | None:
        found = self._get(key)
        if found is None or not isinstance(found[0], DiagramIndex):
            return None
        return (found[0], str(found[1]))

    def put_diagram(self, key: str, index: tuple[DiagramIndex, str]) -> None:
        self._put(key, index)

    def get_result(self, key: str) -> tuple[list[Requirement], list[Finding]] | None:
        """What an identical diff required (see ``analyzer._inputs_key``)."""
        found = self._get(key)
        if found is None or not _all(found[0], Requirement) or not _all(found[1], Finding):
            return None
        return (found[0], found[1])  # type: ignore[return-value]

    def put_result(self, key: str, result: tuple[list[Requirement], list[Finding]]) -> None:
        self._put(key, result)

    def get_report(self, key: str) -> tuple[list[Finding], list[str]] | None:
        """The findings (and the diagrams checked) of an identical check."""
        found = self._get(key)
        if found is None or not _all(found[0], Finding) or not _all(found[1], str):
            return None
        return (found[0], found[1])  # type: ignore[return-value]

    def put_report(self, key: str, report: tuple[list[Finding], list[str]]) -> None:
        self._put(key, report)

    # ------------------------------------------------------------------ modules

    def _modules(self) -> dict[str, bytes]:
        if self._entries is None:
            self._entries = _load(self.path) if self.path is not None else {}
        return self._entries

    def get(self, blob: str) -> ModuleInfo | None:
        found = self._loaded.get(blob)
        if found is None:
            raw = self._modules().get(blob)
            if raw is None:
                return None
            try:
                found = pickle.loads(raw)  # noqa: S301 - our own file in the git directory
            except Exception:  # a damaged entry is a miss
                return None
            if not isinstance(found, ModuleInfo):
                return None
            self._loaded[blob] = found
        return found

    def put(self, blob: str, info: ModuleInfo) -> None:
        if blob not in self._loaded and blob not in self._modules():
            self._loaded[blob] = info
            self._modules_added += 1

    # ------------------------------------------------------------------ files

    def save(self) -> None:
        """Write what was added (oldest entries dropped past the limits); never fails."""
        if self.path is None:
            return
        if self._modules_added:
            entries = dict(self._modules())
            for blob, info in self._loaded.items():
                if blob not in entries:
                    entries[blob] = pickle.dumps(info, protocol=pickle.HIGHEST_PROTOCOL)
            _write(self.path, dict(list(entries.items())[-MAX_ENTRIES:]))
            self._modules_added = 0
        if self._results_added:
            kept: list[tuple[str, bytes]] = []
            size = 0
            for key, raw in reversed(list(self.results.items())[-MAX_RESULTS:]):
                size += len(raw)
                if size > MAX_RESULTS_BYTES and kept:
                    break  # the newest first: what a big diff required goes first
                kept.append((key, raw))
            _write(results_file(self.path), dict(reversed(kept)))
            self._results_added = 0
        current = {self.path.name, results_file(self.path).name}
        with contextlib.suppress(OSError):
            for stale in self.path.parent.glob("diagramcheck-*.pickle"):
                if stale.name not in current:  # left by another version of the code
                    stale.unlink(missing_ok=True)


def results_file(path: Path) -> Path:
    return path.with_name(path.stem + "-results.pickle")


def _all(found: object, kind: type) -> bool:
    return isinstance(found, list) and all(isinstance(x, kind) for x in found)


def _write(path: Path, data: dict[str, bytes]) -> None:
    with contextlib.suppress(OSError):
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-")
        try:
            with os.fdopen(fd, "wb") as fh:
                pickle.dump(data, fh, protocol=pickle.HIGHEST_PROTOCOL)
            os.replace(tmp, path)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(tmp)


def _load(path: Path) -> dict[str, bytes]:
    try:
        with path.open("rb") as fh:
            data = pickle.load(fh)  # noqa: S301 - our own file in the git directory
    except FileNotFoundError:
        return {}
    except Exception:  # a torn or foreign file is an empty cache
        return {}
    if not isinstance(data, dict):
        return {}
    return data
