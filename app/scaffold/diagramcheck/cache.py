"""Parsed Python by blob id, kept between runs, and parsing spread over the cores.

A blob id names its content, so what :func:`~scaffold.diagramcheck.python_model.read_module`
found in a blob stays true: a re-check after a push parses only the blobs the push
added. The cache is one pickle file in the repository's own git directory
(``<git-common-dir>/scaffold/``), which no checked-out file, and so no pull request,
can write; its name carries the parser's version and Python's, so a new parser never
reads an old parser's answers. A missing, unreadable or foreign file is an empty
cache; writing is best effort (atomic rename) and never fails a check.

:func:`parse_all` parses the blobs the cache lacks, in worker processes when there are
many and more than one core.
"""

from __future__ import annotations

import contextlib
import os
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from scaffold.diagramcheck import python_model as pm
from scaffold.diagramcheck.findings import Finding
from scaffold.diagramcheck.mermaid import DiagramIndex

if TYPE_CHECKING:
    from scaffold.diagramcheck.rules import Requirement

# Raise when read_module's answers change shape or meaning.
PARSER_VERSION = 6
MAX_ENTRIES = 20_000
MAX_DIAGRAMS = 256
# Below this many files one process is faster than starting workers.
PARALLEL_MIN_FILES = 300
ENV_DISABLE = "SCAFFOLD_DIAGRAMCHECK_CACHE"


def cache_file(git_dir: Path) -> Path:
    """The cache of this DiagramCheck: its name changes with the code that fills it."""
    py = f"{sys.version_info.major}{sys.version_info.minor}"
    return git_dir / "scaffold" / f"diagramcheck-v{PARSER_VERSION}-py{py}-{_code_id()}.pickle"


_CODE_ID: list[str] = []


def _code_id() -> str:
    """A digest of the DiagramCheck modules (name, size, mtime): new code, new cache."""
    if not _CODE_ID:
        import hashlib

        from scaffold import __version__

        h = hashlib.sha1(__version__.encode(), usedforsecurity=False)
        for path in sorted(Path(__file__).parent.glob("*.py")):
            st = path.stat()
            h.update(f"{path.name}:{st.st_size}:{st.st_mtime_ns}\n".encode())
        _CODE_ID.append(h.hexdigest()[:12])
    return _CODE_ID[0]


class ParseCache:
    """``blob id -> ModuleInfo``, loaded from and saved to one file (or memory only)."""

    def __init__(self, path: Path | None) -> None:
        self.path = path
        # Each entry stays pickled until asked for: loading the file costs little
        # however many modules it holds, and a check unpickles only its own blobs.
        self.entries: dict[str, bytes] = {}
        self._loaded: dict[str, pm.ModuleInfo] = {}
        # What a diagram names, by its path and blob id (re-checks rarely change it),
        # and what a diff required, by the digest of its inputs: pickled, small, few.
        self.diagrams: dict[str, bytes] = {}
        self.added = 0
        self.hits = 0
        if path is not None and os.environ.get(ENV_DISABLE, "1") != "0":
            self.entries, self.diagrams = _load(path)
        else:
            self.path = None

    def get_diagram(self, key: str) -> tuple[DiagramIndex, str] | None:
        raw = self.diagrams.get(key)
        if raw is None:
            return None
        import pickle

        try:
            found = pickle.loads(raw)  # noqa: S301 - our own file in the git directory
        except Exception:  # a damaged entry is a miss
            return None
        if not (isinstance(found, tuple) and len(found) == 2):
            return None
        self.hits += 1
        return (found[0], found[1])

    def put_diagram(self, key: str, index: tuple[DiagramIndex, str]) -> None:
        if key not in self.diagrams:
            import pickle

            self.diagrams[key] = pickle.dumps(index, protocol=pickle.HIGHEST_PROTOCOL)
            self.added += 1

    def get_result(self, key: str) -> tuple[list[Requirement], list[Finding]] | None:
        """What an identical diff required (see ``analyzer._inputs_key``)."""
        raw = self.diagrams.get(key)
        if raw is None:
            return None
        import pickle

        try:
            found = pickle.loads(raw)  # noqa: S301 - our own file in the git directory
        except Exception:  # a damaged entry is a miss
            return None
        if not (isinstance(found, tuple) and len(found) == 2):
            return None
        self.hits += 1
        return (list(found[0]), list(found[1]))

    def put_result(self, key: str, result: tuple[list[Requirement], list[Finding]]) -> None:
        if key not in self.diagrams:
            import pickle

            self.diagrams[key] = pickle.dumps(result, protocol=pickle.HIGHEST_PROTOCOL)
            self.added += 1

    def get_report(self, key: str) -> tuple[list[Finding], list[str]] | None:
        """The findings (and the diagrams checked) of an identical check."""
        raw = self.diagrams.get(key)
        if raw is None:
            return None
        import pickle

        try:
            found = pickle.loads(raw)  # noqa: S301 - our own file in the git directory
        except Exception:  # a damaged entry is a miss
            return None
        if not (isinstance(found, tuple) and len(found) == 2):
            return None
        self.hits += 1
        return (list(found[0]), list(found[1]))

    def put_report(self, key: str, report: tuple[list[Finding], list[str]]) -> None:
        if key not in self.diagrams:
            import pickle

            self.diagrams[key] = pickle.dumps(report, protocol=pickle.HIGHEST_PROTOCOL)
            self.added += 1

    def get(self, blob: str) -> pm.ModuleInfo | None:
        found = self._loaded.get(blob)
        if found is None:
            raw = self.entries.get(blob)
            if raw is None:
                return None
            import pickle

            try:
                found = pickle.loads(raw)  # noqa: S301 - our own file in the git directory
            except Exception:  # a damaged entry is a miss
                return None
            if not isinstance(found, pm.ModuleInfo):
                return None
            self._loaded[blob] = found
        self.hits += 1
        return found

    def put(self, blob: str, info: pm.ModuleInfo) -> None:
        if blob not in self.entries and blob not in self._loaded:
            self._loaded[blob] = info
            self.added += 1

    def save(self) -> None:
        """Write the file when something was added (oldest entries dropped past the limit)."""
        if self.path is None or not self.added:
            return
        import pickle

        entries = dict(self.entries)
        for blob, info in self._loaded.items():
            if blob not in entries:
                entries[blob] = pickle.dumps(info, protocol=pickle.HIGHEST_PROTOCOL)
        if len(entries) > MAX_ENTRIES:
            entries = dict(list(entries.items())[-MAX_ENTRIES:])
        diagrams = dict(list(self.diagrams.items())[-MAX_DIAGRAMS:])
        with contextlib.suppress(OSError):
            self.path.parent.mkdir(parents=True, exist_ok=True)
            import tempfile

            fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=self.path.parent)
            try:
                with os.fdopen(fd, "wb") as fh:
                    pickle.dump(
                        {"modules": entries, "diagrams": diagrams},
                        fh,
                        protocol=pickle.HIGHEST_PROTOCOL,
                    )
                os.replace(tmp, self.path)
                for stale in self.path.parent.glob("diagramcheck-*.pickle"):
                    if stale != self.path:  # left by another version of the code
                        stale.unlink(missing_ok=True)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)
        self.added = 0


def _load(path: Path) -> tuple[dict[str, bytes], dict[str, bytes]]:
    import pickle

    try:
        with path.open("rb") as fh:
            data = pickle.load(fh)  # noqa: S301 - our own file in the git directory
    except FileNotFoundError:
        return {}, {}
    except Exception:  # a torn or foreign file is an empty cache
        return {}, {}
    if not isinstance(data, dict):
        return {}, {}
    modules, diagrams = data.get("modules"), data.get("diagrams")
    if not isinstance(modules, dict) or not isinstance(diagrams, dict):
        return {}, {}
    return modules, diagrams


def _parse_chunk(texts: list[str]) -> list[pm.ModuleInfo]:
    return [pm.read_module(t) for t in texts]


def parse_all(texts: Mapping[str, str], workers: int | None = None) -> dict[str, pm.ModuleInfo]:
    """``read_module`` of every text, keyed like ``texts``; in parallel when it pays.

    The cyclic garbage collector pauses meanwhile: every syntax tree is garbage as soon
    as its module is read (reference counting frees it), and the collector's passes
    over the growing results cost more than the parsing of small files.
    """
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        return _parse_all(texts, workers)
    finally:
        if enabled:
            gc.enable()


def _parse_all(texts: Mapping[str, str], workers: int | None) -> dict[str, pm.ModuleInfo]:
    keys = list(texts)
    cpus = workers if workers is not None else (os.cpu_count() or 1)
    if len(keys) < PARALLEL_MIN_FILES or cpus < 2 or not _can_fork():
        return {k: pm.read_module(texts[k]) for k in keys}
    jobs = min(cpus, 4)
    # Interleaved chunks balance big and small files across the workers.
    chunks = [keys[i::jobs] for i in range(jobs)]
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    ctx = multiprocessing.get_context("fork")
    out: dict[str, pm.ModuleInfo] = {}
    with ProcessPoolExecutor(max_workers=jobs, mp_context=ctx) as pool:
        futures = [pool.submit(_parse_chunk, [texts[k] for k in chunk]) for chunk in chunks[1:]]
        # This process parses the first chunk meanwhile.
        for k, info in zip(chunks[0], _parse_chunk([texts[k] for k in chunks[0]]), strict=True):
            out[k] = info
        for chunk, future in zip(chunks[1:], futures, strict=True):
            for k, info in zip(chunk, future.result(), strict=True):
                out[k] = info
    return out


def _can_fork() -> bool:
    """Fork workers only from a single-threaded process (the CLI, the Action): forking
    a threaded one (the App's server) can copy a lock another thread holds."""
    import multiprocessing
    import threading

    return threading.active_count() == 1 and "fork" in multiprocessing.get_all_start_methods()
