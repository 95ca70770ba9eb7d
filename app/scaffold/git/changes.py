"""The change list between two commits: one :class:`FileChange` per path.

Read by the worktree adapter (which paths a checkout update touches) and by
DiagramCheck (which also reads the blobs on both sides).
"""

from __future__ import annotations

from dataclasses import dataclass

NULL_SHA = "0" * 40


@dataclass(frozen=True)
class FileChange:
    """One record of ``git diff --raw -z --no-abbrev``.

    ``status`` is the letter (``A``, ``M``, ``D``, ``R``, ``C``, ``T``); for ``R``/``C``
    ``old_path`` is the source. The blob ids
    are ``None`` on the side where the file does not exist; the modes say whether a
    side is a regular file, a symlink or a submodule.
    """

    status: str
    path: str
    old_path: str | None
    old_blob: str | None
    new_blob: str | None
    old_mode: str
    new_mode: str

    @property
    def source_path(self) -> str:
        """The path on the old side (the same as ``path`` unless renamed or copied)."""
        return self.old_path if self.old_path is not None else self.path


def parse_raw_z(output: str) -> list[FileChange]:
    """Parse ``git diff --raw -z --no-abbrev`` output (with or without ``-M``).

    With ``-z`` git never quotes paths, so any file name comes through unchanged.
    """
    fields = output.split("\0")
    if fields and fields[-1] == "":
        fields.pop()
    changes: list[FileChange] = []
    i = 0
    while i < len(fields):
        meta = fields[i]
        parts = meta[1:].split(" ")
        if not meta.startswith(":") or len(parts) != 5:
            raise ValueError(f"unexpected raw diff record {meta!r}")
        old_mode, new_mode, old_sha, new_sha, status = parts
        letter = status[0]  # R and C carry a similarity score: R087
        paths = 2 if letter in ("R", "C") else 1  # a rename or copy: source, then path
        if i + paths >= len(fields):
            raise ValueError(f"truncated {letter} record")
        changes.append(
            FileChange(
                status=letter,
                path=fields[i + paths],
                old_path=fields[i + 1] if paths == 2 else None,
                old_blob=None if old_sha == NULL_SHA else old_sha,
                new_blob=None if new_sha == NULL_SHA else new_sha,
                old_mode=old_mode,
                new_mode=new_mode,
            )
        )
        i += paths + 1
    return changes
