"""The one ``git rev-parse`` that resolves a check's two revisions.

It names both commits, their trees, their merge base (when there is exactly one),
the git directory and, if asked, the top of the work tree: what the analyzer needs to
start.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

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


@dataclass(frozen=True)
class Resolved:
    """Both commits (full ids), their trees, the merge base (``None``: left to ``git
    merge-base``), the git (common) directory and the work tree's top (``""`` if not asked)."""

    base: str
    head: str
    base_tree: str
    head_tree: str
    merge_base: str | None
    git_dir: str
    top: str


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
