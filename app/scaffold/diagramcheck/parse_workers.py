"""Reading and parsing the Python blobs a check lacks, spread over the cores.

:func:`read_and_parse` cuts the blobs into runs (the old and the new side of a file sit
side by side and share most of their statements, see
:func:`~scaffold.diagramcheck.python_model.read_module_fast`) and puts one token per
run in a pipe. Forked workers and this process take tokens until none is left, each
reading its runs through its own ``git cat-file --batch`` and parsing them, so git's
reading and Python's parsing run on every core and whoever is free takes the next run:
the work balances itself, whatever else this process does meanwhile (it reads the
diagrams). A worker sends each run back as soon as it is parsed (every module pickled
on its own, as the cache keeps it), and this process unpickles those answers between
its own runs, so little is left to do once the last run is parsed. A run a worker took
but never answered (it failed) is parsed here. Workers are forked only from a
single-threaded process and only for many blobs on more than one core.
"""

from __future__ import annotations

import contextlib
import os
import threading
from collections.abc import Callable
from pathlib import Path

TYPE_CHECKING = False

if TYPE_CHECKING:
    from scaffold.diagramcheck import python_model as pm
    from scaffold.diagramcheck.git_diff import BlobReader

# Below this many files one process is faster than starting workers.
PARALLEL_MIN_FILES = 300
MAX_WORKERS = 3
# Runs are named by one byte in the token pipe.
MAX_RUNS = 255
MIN_RUN = 8
_FRAME = 8  # the length prefix of a worker's answer


def read_and_parse(
    repo: Path,
    blobs: list[str],
    meanwhile: Callable[[], None] | None = None,
    reader: BlobReader | None = None,
    pickles: dict[str, bytes] | None = None,
    objects: str | None = None,
) -> dict[str, pm.ModuleInfo | None]:
    """Read and parse Python blobs (``None``: binary or not UTF-8), in ``blobs``' order.

    ``meanwhile`` runs in this process while the workers parse (before it takes its
    first run); without workers it does not run (the caller does what it needs then).
    ``reader``: a ``cat-file`` process already running, for this process's share.
    ``pickles`` gets the pickle of each module read in parallel (what a worker sent;
    this process pickles its own runs between them rather than when the cache is
    saved), for :meth:`ParseCache.put`. ``objects``: the object store loose blobs are
    read from (:mod:`~scaffold.diagramcheck.loose_objects`), ``None`` for git alone.
    """
    if not blobs:
        return {}
    import gc

    enabled = gc.isenabled()
    gc.disable()
    try:
        cpus = os.cpu_count() or 1
        if len(blobs) < PARALLEL_MIN_FILES or cpus < 2 or not _can_fork():
            return read_and_parse_chunk(repo, blobs, reader, objects)
        workers = min(cpus, MAX_WORKERS + 1) - 1
        return _in_parallel(repo, blobs, workers, meanwhile, reader, pickles, objects)
    finally:
        if enabled:
            gc.enable()


def _runs(blobs: list[str], jobs: int) -> list[list[str]]:
    size = max(MIN_RUN, -(-len(blobs) // MAX_RUNS), -(-len(blobs) // (jobs * 24)))
    return [blobs[i : i + size] for i in range(0, len(blobs), size)]


def _in_parallel(
    repo: Path,
    blobs: list[str],
    workers: int,
    meanwhile: Callable[[], None] | None,
    reader: BlobReader | None,
    pickles: dict[str, bytes] | None,
    objects: str | None,
) -> dict[str, pm.ModuleInfo | None]:
    from scaffold.diagramcheck import python_model as pm

    runs = _runs(blobs, workers + 1)
    queue, tokens = os.pipe()
    os.write(tokens, bytes(range(len(runs))))  # fits a pipe's buffer: no reader needed
    os.close(tokens)  # an empty queue reads as end of file
    out: dict[str, pm.ModuleInfo | None] = {}
    inboxes: list[_Inbox] = []
    try:
        for _ in range(workers):
            inboxes.append(_Inbox(*_fork_worker(repo, runs, queue, objects)))
            inboxes[-1].start()
        if meanwhile is not None:
            meanwhile()
        memo = pm.StatementMemo()
        with contextlib.ExitStack() as stack:
            if reader is None:
                from scaffold.diagramcheck.git_diff import BlobReader

                reader = stack.enter_context(BlobReader(repo))
            while True:
                for inbox in inboxes:
                    _unpickle(inbox.take(), out, pickles)
                token = os.read(queue, 1)
                if not token:
                    break
                fresh = parse_blobs(reader, runs[token[0]], memo, objects)
                out.update(fresh)
                if pickles is not None:  # as the workers do: the cache keeps these
                    _pickle_into(fresh, pickles)
            for inbox in inboxes:
                inbox.finish()
                _unpickle(inbox.take(), out, pickles)
            missing = [b for b in blobs if b not in out]  # a worker failed
            if missing:
                out.update(parse_blobs(reader, missing, memo, objects))
    finally:
        with contextlib.suppress(OSError):
            while os.read(queue, 256):  # on an error here: the workers stop early
                pass
        os.close(queue)
        for inbox in inboxes:
            inbox.finish()
    return {blob: out[blob] for blob in blobs}


def _unpickle(
    answers: list[bytes], out: dict[str, pm.ModuleInfo | None], pickles: dict[str, bytes] | None
) -> None:

    for payload in answers:
        for blob, (info, raw) in _answer(payload).items():
            out[blob] = info
            if raw is not None and pickles is not None:
                pickles[blob] = raw  # pickled one by one in the worker: the cache keeps these


def _pickle_into(fresh: dict[str, pm.ModuleInfo | None], pickles: dict[str, bytes]) -> None:
    import pickle

    for blob, info in fresh.items():
        if info is not None:
            pickles[blob] = pickle.dumps(info, protocol=pickle.HIGHEST_PROTOCOL)


def _answer(payload: bytes) -> dict[str, tuple[pm.ModuleInfo | None, bytes | None]]:
    """One answer of a worker, each module with its pickle; empty when anything in it is
    damaged (its blobs are then parsed here)."""
    import pickle

    from scaffold.diagramcheck.python_model import ModuleInfo

    try:
        answer = pickle.loads(payload)  # noqa: S301 - our own worker's
        if not isinstance(answer, dict):
            return {}
        found: dict[str, tuple[pm.ModuleInfo | None, bytes | None]] = {}
        for blob, raw in answer.items():
            info = pickle.loads(raw) if raw is not None else None  # noqa: S301 - our worker's
            if not isinstance(blob, str) or not (info is None or isinstance(info, ModuleInfo)):
                return {}
            found[blob] = (info, raw)
    except Exception:
        return {}
    return found


def read_and_parse_chunk(
    repo: Path, blobs: list[str], reader: BlobReader | None = None, objects: str | None = None
) -> dict[str, pm.ModuleInfo | None]:
    """Read and parse ``blobs`` in this process (through ``reader``, or a new one)."""
    from scaffold.diagramcheck import python_model as pm
    from scaffold.diagramcheck.git_diff import BlobReader

    with contextlib.ExitStack() as stack:
        if reader is None:
            reader = stack.enter_context(BlobReader(repo))
        return parse_blobs(reader, blobs, pm.StatementMemo(), objects)


def parse_blobs(
    reader: BlobReader, blobs: list[str], memo: pm.StatementMemo, objects: str | None = None
) -> dict[str, pm.ModuleInfo | None]:
    from scaffold.diagramcheck import python_model as pm
    from scaffold.diagramcheck.git_diff import decode_text
    from scaffold.diagramcheck.loose_objects import read_blobs

    out: dict[str, pm.ModuleInfo | None] = {}
    for blob, data in zip(blobs, read_blobs(reader, objects, blobs), strict=True):
        text = decode_text(data) if data is not None else None
        out[blob] = pm.read_module_fast(text, memo) if text is not None else None
    return out


def worker_answer(
    reader: BlobReader, blobs: list[str], memo: pm.StatementMemo, objects: str | None = None
) -> dict[str, bytes | None]:
    """A worker's answer for one run: each module pickled on its own (as the cache
    stores it), so the parent does not pickle it again to save it."""
    import pickle

    return {
        blob: pickle.dumps(info, protocol=pickle.HIGHEST_PROTOCOL) if info is not None else None
        for blob, info in parse_blobs(reader, blobs, memo, objects).items()
    }


def _fork_worker(
    repo: Path, runs: list[list[str]], queue: int, objects: str | None
) -> tuple[int, int]:
    """A forked process that takes runs from ``queue`` and sends back each answer (a
    length-prefixed pickle) through a pipe: its id and the pipe's reading end.

    ``os.fork`` itself, not ``multiprocessing``: the pool, its queues and its thread cost
    tens of milliseconds of imports and start-up.
    """
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # pragma: no cover - the worker (its coverage is not collected)
        code = 1
        try:
            os.close(read_end)
            _work(repo, runs, queue, write_end, objects)
            code = 0
        finally:
            os._exit(code)  # no atexit handlers, no flushing of the parent's buffers
    os.close(write_end)
    return pid, read_end


def _work(  # pragma: no cover - in the worker
    repo: Path, runs: list[list[str]], queue: int, answers: int, objects: str | None
) -> None:
    import pickle

    from scaffold.diagramcheck import python_model as pm
    from scaffold.diagramcheck.git_diff import BlobReader

    memo = pm.StatementMemo()
    with BlobReader(repo) as reader, open(answers, "wb") as out:
        while token := os.read(queue, 1):
            payload = pickle.dumps(
                worker_answer(reader, runs[token[0]], memo, objects),
                protocol=pickle.HIGHEST_PROTOCOL,
            )
            out.write(len(payload).to_bytes(_FRAME, "little") + payload)
            out.flush()


class _Inbox:
    """A worker's answers, read by a thread (reading waits outside the interpreter's
    lock) so the worker never waits on a full pipe while this process is busy."""

    def __init__(self, pid: int, fd: int) -> None:
        self.pid = pid
        self.fd = fd
        self._chunks: list[bytes] = []
        self._buffer = b""
        self._thread: threading.Thread | None = None
        self._reaped = False

    def start(self) -> None:
        self._thread = threading.Thread(target=self._read, daemon=True)
        self._thread.start()

    def _read(self) -> None:
        with contextlib.suppress(OSError):
            while chunk := os.read(self.fd, 1 << 20):
                self._chunks.append(chunk)

    def take(self) -> list[bytes]:
        """The answers complete so far."""
        if not self._chunks:
            return []
        count = len(self._chunks)
        data = self._buffer + b"".join(self._chunks[:count])
        del self._chunks[:count]
        frames: list[bytes] = []
        at = 0
        while len(data) - at >= _FRAME:
            size = int.from_bytes(data[at : at + _FRAME], "little")
            if len(data) - at - _FRAME < size:
                break
            frames.append(data[at + _FRAME : at + _FRAME + size])
            at += _FRAME + size
        self._buffer = data[at:]
        return frames

    def finish(self) -> None:
        """Wait for the worker's last answer and reap it."""
        if self._reaped:
            return
        if self._thread is not None:
            self._thread.join()
        else:
            self._read()
        self._reaped = True
        with contextlib.suppress(OSError):
            os.close(self.fd)
        os.waitpid(self.pid, 0)


def _can_fork() -> bool:
    """Fork workers only from a single-threaded process (the CLI, the Action): forking
    a threaded one (the App's server) can copy a lock another thread holds."""
    return threading.active_count() == 1 and hasattr(os, "fork")
