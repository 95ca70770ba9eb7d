"""The one ``git rev-parse`` that resolves a check's two revisions.

It names both commits, their trees, their merge base (when there is exactly one),
the git directory and, if asked, the top of the work tree: what the analyzer needs to
start and what the CLI's stored outputs are keyed by (see
:mod:`~scaffold.diagramcheck.output_cache`). Only ``os`` is imported, so a check
answered from the stored outputs can resolve its revisions without ``subprocess``.
"""

from __future__ import annotations

import os

TYPE_CHECKING = False

if TYPE_CHECKING:
    from typing import Any

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
    return len(text) in (40, 64) and all(c in "0123456789abcdef" for c in text)


class Resolved:
    """Both commits (full ids), their trees, the merge base (``None``: left to ``git
    merge-base``), the git (common) directory and the work tree's top (``""`` if not asked)."""

    __slots__ = ("base", "base_tree", "git_dir", "head", "head_tree", "merge_base", "top")

    def __init__(
        self,
        base: str,
        head: str,
        base_tree: str,
        head_tree: str,
        merge_base: str | None,
        git_dir: str,
        top: str,
    ) -> None:
        self.base = base
        self.head = head
        self.base_tree = base_tree
        self.head_tree = head_tree
        self.merge_base = merge_base
        self.git_dir = git_dir
        self.top = top


def rev_parse_args(base: str, head: str, toplevel: bool) -> list[str]:
    """The ``rev-parse`` arguments (after ``git``) for :func:`parse_rev_parse`."""
    b, h = f"{base}^{{commit}}", f"{head}^{{commit}}"
    # ``b...h`` prints h, b and ``^<merge base>`` for each merge base.
    spec = [b, h, f"{base}^{{tree}}", f"{head}^{{tree}}", f"{b}...{h}"]
    top = ["--show-toplevel"] if toplevel else []
    return ["rev-parse", *top, "--git-common-dir", *spec, "--"]


def parse_rev_parse(stdout: str, returncode: int, toplevel: bool, cwd: str) -> Resolved | None:
    """What :func:`rev_parse_args` printed, run in ``cwd``; ``None`` when that is not
    plainly two commits (then each is resolved on its own, with its own error)."""
    lines = stdout.splitlines()
    if returncode != 0 or not lines:
        return None
    top = lines.pop(0) if toplevel else ""
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
    return Resolved(shas[0], shas[1], shas[2], shas[3], mb, git_dir, top)


def resolve_quick(start: str, base: str, head: str) -> Resolved | None:
    """:func:`parse_rev_parse` of git run in ``start`` with the top asked, started with
    ``posix_spawn`` (``subprocess`` alone costs milliseconds to import). ``None`` for
    anything unusual (a bad revision, no repository, no ``posix_spawn``): the caller
    then goes the long way, which reports the error."""
    from scaffold.git.environment import GIT, git_env

    if is_bad_ref(base) or is_bad_ref(head) or not os.path.isdir(start):
        return None
    spawn = getattr(os, "posix_spawnp", None)
    if spawn is None:  # pragma: no cover - not on Linux or macOS
        return None
    argv = [GIT, "-C", start, *rev_parse_args(base, head, True)]
    try:
        code, out = _run(spawn, argv, git_env())
    except OSError:  # no pipe, no process: the long way says what is wrong
        return None
    return parse_rev_parse(out.decode("utf-8", "surrogateescape"), code, True, start)


def _run(spawn: Any, argv: list[str], env: dict[str, str]) -> tuple[int, bytes]:
    """Exit code and standard output of ``argv`` (stdin and stderr: the null device)."""
    read_end, write_end = os.pipe()
    try:
        pid = spawn(
            argv[0],
            argv,
            env,
            file_actions=[
                (os.POSIX_SPAWN_OPEN, 0, os.devnull, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_DUP2, write_end, 1),
                (os.POSIX_SPAWN_OPEN, 2, os.devnull, os.O_WRONLY, 0),
            ],
        )
    except BaseException:
        os.close(read_end)
        raise
    finally:
        os.close(write_end)
    chunks: list[bytes] = []
    try:
        with open(read_end, "rb", buffering=0, closefd=True) as out:
            while chunk := out.read(65536):
                chunks.append(chunk)
    finally:
        _, status = os.waitpid(pid, 0)
    return os.waitstatus_to_exitcode(status), b"".join(chunks)
