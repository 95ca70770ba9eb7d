"""Finding what a killed scaffold run left behind."""

from __future__ import annotations

import contextlib
import os
import signal as signals
from pathlib import Path


def kill_orphan_agents(quest_id: str, runs_dir: Path) -> list[int]:
    """Kill agent process groups of this quest that outlived a previous scaffold run.

    A quest id is only unique within one repository (every repository has a quest
    ``backlog``), so a process counts as ours only if its ``SCAFFOLD_SIGNAL_DIR`` is
    under this repository's ``runs_dir`` too: another repository's agents are left alone.
    """
    marker = f"SCAFFOLD_QUEST_ID={quest_id}".encode()
    prefix = b"SCAFFOLD_SIGNAL_DIR="
    root = runs_dir.resolve()
    me = os.getpid()
    killed: list[int] = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            environ = (entry / "environ").read_bytes().split(b"\0")
        except OSError:
            continue
        if marker not in environ:
            continue
        dirs = [v[len(prefix) :] for v in environ if v.startswith(prefix)]
        if not any(Path(os.fsdecode(d)).resolve().is_relative_to(root) for d in dirs):
            continue
        pid = int(entry.name)
        with contextlib.suppress(OSError):
            pgid = os.getpgid(pid)
            if pgid != os.getpgid(me):
                os.killpg(pgid, signals.SIGKILL)
                killed.append(pid)
    return killed
