"""Where one agent run's signals go, and how they are read back.

:class:`Binding` says who may signal (quest, step, role) and where an accepted signal
is stored: ``signal-<seq>.json`` in the run's signal folder, written, fsynced and
atomically named by :class:`SignalWriter` *before* the agent hears back, so a signal
the agent saw acknowledged survives a crash of anything afterwards. The orchestrator
reads the files with :func:`read_signals` / :func:`latest_signal`; the last one wins.
"""

from __future__ import annotations

import logging
import os
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from pydantic import BaseModel, ConfigDict, ValidationError

from scaffold.roles import Role
from scaffold.signal_back.planning import problems_from, write_durably
from scaffold.signals import AnySignal, Signal

_SIGNAL_FILE = re.compile(r"^signal-(\d{1,9})\.json$")
_log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Binding:
    """Who may signal through this server, and where accepted signals go.

    ``repo_root`` is the repository whose backlog ``create-tasks`` writes to; without
    it that tool refuses.
    """

    signal_dir: Path
    step_id: str
    role: Role
    quest_id: str | None = None
    repo_root: Path | None = None


class SignalRecord(BaseModel):
    """One accepted signal as stored in ``signal-<seq>.json``."""

    model_config = ConfigDict(extra="ignore", frozen=True)

    quest_id: str | None
    step_id: str
    role: Role
    received_at: datetime
    seq: int
    signal: Signal


def read_signals(signal_dir: Path | str) -> list[SignalRecord]:
    """Accepted signals in the order they arrived; a file that is not a record is logged and
    skipped (a missing directory is an empty list: the agent never signalled)."""
    directory = Path(signal_dir)
    try:
        names = os.listdir(directory)
    except FileNotFoundError:
        return []
    found = sorted((int(m.group(1)), directory / n) for n in names if (m := _SIGNAL_FILE.match(n)))
    records: list[SignalRecord] = []
    for seq, path in found:
        try:
            record = SignalRecord.model_validate_json(path.read_bytes())
        except OSError as exc:
            problem = f"unreadable: {exc.strerror or exc}"
        except ValidationError as exc:
            problem = f"not a signal record: {problems_from(exc)[0]}"
        else:
            if record.seq == seq:
                records.append(record)
                continue
            problem = f"seq {record.seq} does not match file name"
        _log.warning("skipping corrupt signal file %s: %s", path, problem)
    return records


def latest_signal(signal_dir: Path | str) -> SignalRecord | None:
    """The signal that counts: the last accepted one, or ``None``."""
    records = read_signals(signal_dir)
    return records[-1] if records else None


class SignalWriter:
    """Stores accepted signals durably, numbering them 1, 2, 3... in arrival order."""

    def __init__(self, binding: Binding) -> None:
        self.binding = binding

    def write(self, signal: AnySignal) -> SignalRecord:
        """Write one record; return only once the file and its name are on disk."""
        directory = self.binding.signal_dir
        names = os.listdir(directory) if directory.is_dir() else []
        seq = max((int(m.group(1)) for n in names if (m := _SIGNAL_FILE.match(n))), default=0) + 1
        while True:
            record = SignalRecord(
                quest_id=self.binding.quest_id,
                step_id=self.binding.step_id,
                role=self.binding.role,
                received_at=datetime.now(UTC),
                seq=seq,
                signal=signal,
            )
            data = record.model_dump_json().encode()
            if write_durably(directory, f"signal-{seq}.json", data, exclusive=True):
                return record
            seq += 1  # another writer took this number; never overwrite a signal
