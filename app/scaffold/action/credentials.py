"""Keep the checkout's push credentials away from the agent while it runs.

``actions/checkout`` leaves its token where every later git command finds it:
an ``http.<url>.extraheader`` entry in ``.git/config`` (up to v5), or an
``includeIf.gitdir:<dir>.path`` entry naming a config file under
``$RUNNER_TEMP`` that holds the header (v6). An agent runs arbitrary commands
in that checkout, so :func:`hidden_credentials` takes those entries out of the
repository's config (and empties the included credential files) for as long
as the agent runs, and puts everything back afterwards, before scaffold pushes.
The values are kept in memory only and never printed.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from scaffold.errors import GitError
from scaffold.git.runner import run_git

_CREDENTIAL_KEY = re.compile(r"^http\..*\.extraheader\Z|^includeif\..*\.path\Z|^include\.path\Z")
_HEADER_KEY = re.compile(r"^http\..*\.extraheader\Z")


@dataclass(frozen=True)
class HiddenConfig:
    """What was taken out: config entries (key, value) and the files that were emptied."""

    entries: tuple[tuple[str, str], ...]
    files: tuple[tuple[Path, bytes], ...]


def local_config(repo: Path) -> list[tuple[str, str]]:
    """Every entry of the repository's own config, in file order."""
    out = run_git(["config", "--local", "--list", "-z"], repo, check=False)
    entries: list[tuple[str, str]] = []
    for record in out.stdout.split("\0"):
        if record:
            key, _, value = record.partition("\n")
            entries.append((key, value))
    return entries


def _holds_header(path: Path, repo: Path) -> bool:
    out = run_git(["config", "--file", str(path), "--list", "-z"], repo, check=False)
    return any(
        _HEADER_KEY.match(record.partition("\n")[0].lower())
        for record in out.stdout.split("\0")
        if record
    )


def _included_file(value: str, repo: Path) -> Path | None:
    path = Path(value).expanduser()
    if not path.is_absolute():
        path = repo / ".git" / path
    return path if path.is_file() else None


def hide(repo: Path) -> HiddenConfig:
    entries = [(k, v) for k, v in local_config(repo) if _CREDENTIAL_KEY.match(k.lower())]
    files: list[tuple[Path, bytes]] = []
    for key, value in entries:
        if key.lower().endswith(".path"):
            path = _included_file(value, repo)
            if path is not None and _holds_header(path, repo):
                files.append((path, path.read_bytes()))
    for key in dict.fromkeys(k for k, _ in entries):
        run_git(["config", "--local", "--unset-all", key], repo, check=False)
    for path, _ in files:
        path.write_bytes(b"")
    return HiddenConfig(tuple(entries), tuple(files))


def restore(repo: Path, hidden: HiddenConfig) -> None:
    for path, data in hidden.files:
        path.write_bytes(data)
    for key, _ in hidden.entries:
        # whatever the agent may have written under the same keys goes first
        run_git(["config", "--local", "--unset-all", key], repo, check=False)
    for key, value in hidden.entries:
        out = run_git(["config", "--local", "--add", key, value], repo, check=False)
        if out.returncode != 0:
            # not GitError(argv): the argv holds the credential
            raise GitError(["config", "--local", "--add", key], out.returncode, "(not shown)")


@contextlib.contextmanager
def hidden_credentials(repo: Path) -> Iterator[HiddenConfig]:
    hidden = hide(repo)
    try:
        yield hidden
    finally:
        restore(repo, hidden)
