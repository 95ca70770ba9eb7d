"""Take the checkout's push credentials out of the repository before the agent runs.

``actions/checkout`` leaves its token where every later git command finds it: an
``http.<url>.extraheader`` entry in ``.git/config`` (up to v5), or an
``includeIf.gitdir:<dir>.path`` entry naming a file under ``$RUNNER_TEMP`` that holds
the header (v6). An agent runs arbitrary commands in that checkout, so
:func:`take_credentials` removes those entries (and empties the included files) and
keeps the headers in memory only, for good: a config the agent could write is never
trusted with a credential again. Values are never printed.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

from scaffold.git.runner import SAFE_LOCAL, run_git

_HEADER_KEY = re.compile(r"^http\.(?:.*\.)?extraheader\Z")
_CREDENTIAL_KEY = re.compile(
    r"^http\.(?:.*\.)?extraheader\Z|^includeif\..*\.path\Z|^include\.path\Z"
)


@dataclass(frozen=True)
class Credentials:
    """Config entries (``http.<url>.extraheader``, value) taken out of a checkout.

    In memory only; the representation never shows a value.
    """

    entries: tuple[tuple[str, str], ...] = field(default=(), repr=False)

    def secrets(self) -> tuple[str, ...]:
        """Every value, and the encoded part of each header, for masking output."""
        out: list[str] = []
        for _, value in self.entries:
            out += [value, value.rpartition(" ")[2]]
        return tuple(s for s in dict.fromkeys(out) if s)

    def __repr__(self) -> str:
        return f"Credentials({len(self.entries)} entries)"


def _entries(args: list[str], repo: Path) -> list[tuple[str, str]]:
    out = run_git(
        [*SAFE_LOCAL, "config", *args, "--no-includes", "--list", "-z"], repo, check=False
    )
    entries: list[tuple[str, str]] = []
    for record in out.stdout.split("\0"):
        if record:
            key, _, value = record.partition("\n")
            entries.append((key, value))
    return entries


def _included_file(value: str, repo: Path) -> Path | None:
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = repo / ".git" / path
    return path if path.is_file() else None


def take_credentials(repo: Path) -> Credentials:
    """Remove the checkout's credentials from ``repo`` for good and return them."""
    found = [(k, v) for k, v in _entries(["--local"], repo) if _CREDENTIAL_KEY.match(k.lower())]
    headers: list[tuple[str, str]] = []
    for key, value in found:
        if _HEADER_KEY.match(key.lower()):
            headers.append((key, value))
            continue
        path = _included_file(value, repo)
        if path is None:
            continue
        held = [(k, v) for k, v in _entries(["--file", str(path)], repo) if _HEADER_KEY.match(k)]
        if held:
            headers += held
            path.write_bytes(b"")
    for key in dict.fromkeys(k for k, _ in found):
        run_git([*SAFE_LOCAL, "config", "--local", "--unset-all", key], repo, check=False)
    return Credentials(tuple(dict.fromkeys(headers)))
