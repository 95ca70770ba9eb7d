"""What ``scaffold diagram-check`` printed, kept for the same check again.

A check's output is a function of its two commits and of the code and format that
print it: a commit id names its content, so the diff, the Python of both sides, the
diagrams and ``.github/scaffold.yml`` (the settings are read as committed at the
head) are all fixed by the two ids. The command line therefore keeps what it printed,
and its exit code, under a digest of: both commits' full ids, their trees and their
merge base (from the one ``rev-parse`` of :mod:`~scaffold.diagramcheck.revisions`),
the output format, the bytes of the repository's git config (rename detection reads
it), scaffold's version, Python's, and a digest of DiagramCheck's code
(:func:`~scaffold.diagramcheck.digest.code_id`). A re-run, or a retry of the same CI
job, is then one ``rev-parse`` and one small file read, with nothing imported but
``os`` and ``sys``.

The files live with the parse cache, in ``<git-common-dir>/scaffold/outputs/``, which
no checked-out file (and so no pull request) can write, under the same rules: one file
per key, written atomically (a rename), best effort (an unwritable directory is a
check without a stored output, never a failure), at most :data:`MAX_FILES` kept (the
oldest go). A file is trusted only when it has the expected header, names the very
key it is read for, holds exit code 0 or 1, and its output matches the SHA-1 it
carries: anything else (torn, corrupt, foreign, another version's) is a miss, and the
check runs and replaces it. Errors (exit 2) are never stored.
``SCAFFOLD_DIAGRAMCHECK_CACHE=0`` turns it off, like the parse cache.
"""

from __future__ import annotations

import os

from scaffold.diagramcheck.digest import code_id, sha1

TYPE_CHECKING = False

if TYPE_CHECKING:
    from scaffold.diagramcheck.revisions import Resolved

ENV_DISABLE = "SCAFFOLD_DIAGRAMCHECK_CACHE"  # cache.ENV_DISABLE, without importing it
MAGIC = b"scaffold-diagramcheck-output 1\n"
MAX_FILES = 64
# A bigger output is printed, not kept.
MAX_BYTES = 16_000_000


def enabled() -> bool:
    return os.environ.get(ENV_DISABLE, "1") != "0"


def key(found: Resolved, fmt: str) -> str:
    """The digest of everything the output of ``found`` printed as ``fmt`` depends on."""
    h = sha1(MAGIC)
    fields = (
        code_id(),
        fmt,
        found.base,
        found.head,
        found.base_tree,
        found.head_tree,
        found.merge_base or "-",
    )
    h.update("\0".join(fields).encode("utf-8", "surrogateescape"))
    h.update(b"\0config\0")
    try:
        with open(os.path.join(found.git_dir, "config"), "rb") as fh:
            h.update(fh.read())
    except OSError:
        h.update(b"-")
    return h.hexdigest()


def directory(git_dir: str) -> str:
    return os.path.join(git_dir, "scaffold", "outputs")


def read(git_dir: str, name: str) -> tuple[int, str] | None:
    """The exit code and output stored under ``name``; ``None`` unless the file is whole
    and is this key's."""
    try:
        with open(os.path.join(directory(git_dir), name), "rb") as fh:
            data = fh.read(MAX_BYTES + 4096)
    except (OSError, ValueError):
        return None
    head, sep, body = data.partition(b"\n\n")
    if not sep or not head.startswith(MAGIC):
        return None
    fields = head[len(MAGIC) :].split(b"\n")
    if len(fields) != 3:
        return None
    stored_key, code, digest = fields
    if stored_key != name.encode() or code not in (b"0", b"1"):
        return None
    if sha1(body).hexdigest().encode() != digest:
        return None
    return int(code), body.decode("utf-8", "surrogateescape")


def store(git_dir: str, name: str, code: int, output: str) -> None:
    """Keep ``output`` and ``code`` under ``name`` (atomically); never fails."""
    if code not in (0, 1):
        return
    body = output.encode("utf-8", "surrogateescape")
    if len(body) > MAX_BYTES:
        return
    digest = sha1(body).hexdigest()
    data = b"".join((MAGIC, f"{name}\n{code}\n{digest}\n\n".encode(), body))
    where = directory(git_dir)
    tmp = os.path.join(where, f".tmp-{os.getpid()}-{os.urandom(6).hex()}")
    try:
        os.makedirs(where, exist_ok=True)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        try:
            with os.fdopen(fd, "wb") as fh:
                fh.write(data)
            os.replace(tmp, os.path.join(where, name))
        finally:
            if os.path.exists(tmp):
                os.unlink(tmp)
        _prune(where)
    except OSError:
        return


def _prune(where: str) -> None:
    """Keep the newest :data:`MAX_FILES` outputs."""
    with os.scandir(where) as entries:
        found = [(e.stat().st_mtime_ns, e.path) for e in entries if e.is_file()]
    if len(found) <= MAX_FILES:
        return
    found.sort()
    for _, path in found[: len(found) - MAX_FILES]:
        try:
            os.unlink(path)
        except OSError:
            continue
