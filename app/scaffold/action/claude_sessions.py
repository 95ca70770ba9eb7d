"""Claude Code's session files, carried from one runner to the next.

Claude Code keeps a session as ``<config>/projects/<cwd-slug>/<session-id>.jsonl``
(``<config>``: ``$CLAUDE_CONFIG_DIR`` or ``~/.claude``; the slug is the working directory
with every character but letters and digits turned into ``-``). A slot saves the file
with its artifacts; a later slot puts it back before ``--resume``.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from pathlib import Path

from scaffold.errors import UsageError

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_-]{0,127}\Z", re.ASCII)
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]")


def check_session_id(value: str) -> str:
    if not _SESSION_ID.match(value):
        raise UsageError(f"not a valid session id: {value!r}")
    return value


def config_dir(environ: Mapping[str, str] | None = None) -> Path:
    env = os.environ if environ is None else environ
    explicit = env.get("CLAUDE_CONFIG_DIR", "")
    if explicit:
        return Path(explicit)
    home = env.get("HOME", "")
    return (Path(home) if home else Path.home()) / ".claude"


def find_session_file(session_id: str, environ: Mapping[str, str] | None = None) -> Path | None:
    """The session's file under any project folder, or ``None``."""
    name = f"{check_session_id(session_id)}.jsonl"
    found = sorted((config_dir(environ) / "projects").glob(f"*/{name}"))
    return next((p for p in found if p.is_file()), None)


def restore_session_file(
    source: Path, session_id: str, cwd: Path, environ: Mapping[str, str] | None = None
) -> Path:
    """Put a saved session file where Claude Code looks for it when run in ``cwd``."""
    if not source.is_file():
        raise UsageError(f"no session file at {source}")
    target_dir = config_dir(environ) / "projects" / _NOT_ALNUM.sub("-", str(cwd))
    target_dir.mkdir(parents=True, exist_ok=True)
    target = target_dir / f"{check_session_id(session_id)}.jsonl"
    shutil.copyfile(source, target)
    return target
