"""What a person sees while scaffold works: one plain line per thing that happened.

On a terminal the same lines are printed with colour and a status line of the slots;
piped into a file or CI log they are plain text, one event a line.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.live import Live


@dataclass(frozen=True)
class SlotRow:
    step: str
    state: str
    role: str
    elapsed_s: float
    cost_usd: float


class Reporter:
    def __init__(self, stream: TextIO | None = None, *, color: bool | None = None) -> None:
        self.stream = stream or sys.stdout
        self.color = self.stream.isatty() if color is None else color
        self.started = time.monotonic()
        self.lines: list[str] = []
        self._live: Live | None = None

    def _emit(self, text: str, style: str = "") -> None:
        stamp = f"{time.monotonic() - self.started:7.1f}s"
        self.lines.append(text)
        if self.color and style:
            codes = {"warn": "33", "ok": "32", "ask": "35;1", "dim": "2"}
            text = f"\x1b[{codes[style]}m{text}\x1b[0m"
        if self._live is not None:
            self._live.console.print(f"{stamp}  {text}", markup=False, highlight=False)
            return
        self.stream.write(f"{stamp}  {text}\n")
        self.stream.flush()

    def slots(self, rows: list[SlotRow], done: int, total: int, cost_usd: float) -> None:
        """The live view of the slots; only on a terminal (a log gets the event lines)."""
        if not self.color:
            return
        from rich.live import Live
        from rich.table import Table

        table = Table(title=f"{done}/{total} task(s) done, ${cost_usd:.2f} spent", expand=False)
        for column in ("task", "state", "role", "elapsed", "cost"):
            table.add_column(column)
        for r in rows:
            table.add_row(r.step, r.state, r.role, f"{r.elapsed_s:.0f}s", f"${r.cost_usd:.2f}")
        if self._live is None:
            self._live = Live(table, auto_refresh=False, transient=True)
            self._live.start()
        else:
            self._live.update(table, refresh=True)

    def close(self) -> None:
        if self._live is not None:
            self._live.stop()
            self._live = None

    def line(self, text: str) -> None:
        self._emit(text)

    def warn(self, text: str) -> None:
        self._emit(f"! {text}", "warn")

    def transition(self, step: str, source: str | None, target: str | None, event: str) -> None:
        if source == target:
            self._emit(f"{step}: {event} (stays {target})", "dim")
        else:
            self._emit(f"{step}: {source} -> {target} ({event})", "ok" if target == "Idle" else "")

    def agent_started(self, step: str, role: str, kind: str, resume: str | None) -> None:
        how = f"resuming session {resume[:8]}" if resume else "new session"
        self._emit(f"{step}: agent {role} started ({kind}, {how})")

    def agent_finished(self, step: str, role: str, seconds: float, cost: float) -> None:
        self._emit(f"{step}: agent {role} finished in {seconds:.1f}s, ${cost:.4f}", "dim")

    def question(self, step: str, question_id: str, question: str, context: str) -> None:
        self._emit(f"{step}: QUESTION {question_id}: {question}", "ask")
        if context:
            self._emit(f"    context: {context}", "dim")
        self._emit(f'    answer with: scaffold answer {question_id} "<your answer>"', "dim")
