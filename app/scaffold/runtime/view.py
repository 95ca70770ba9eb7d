"""What a person sees while scaffold works: one plain line per thing that happened.

On a terminal the same lines are printed with colour and a status line of the slots;
piped into a file or CI log they are plain text, one event a line.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import TYPE_CHECKING, Any, TextIO

from scaffold.core.states import Lifecycle
from scaffold.quest.model import HistoryEntry, TaskRecord

if TYPE_CHECKING:
    from rich.live import Live

# A reason longer than this is cut in the live lines (the journal keeps all of it).
DETAIL_CHARS = 300


@dataclass(frozen=True)
class SlotRow:
    step: str
    state: str
    role: str
    elapsed_s: float
    cost_usd: float


def state_label(task: TaskRecord) -> str:
    """A task's state as a person needs it: what it is waiting for, not just its state."""
    state = task.state.value
    if task.question_id is not None:
        return f"{state}, waiting for the answer to {task.question_id}"
    if task.state is Lifecycle.IDLE:
        return {"merged": "Done", "rejected": "Idle (rejected)", "aborted": "Idle (stopped)"}.get(
            task.outcome or "", "Idle (waiting for its dependencies)"
        )
    if task.state is Lifecycle.READY:
        return "Ready (waiting for a slot)"
    return state


def slot_rows(tasks: Iterable[TaskRecord], now: datetime) -> list[SlotRow]:
    """Every task of the quest but the finished ones, with what it is doing."""
    return [
        SlotRow(
            step=t.id,
            state=state_label(t),
            role=t.role.value if t.role else "-",
            elapsed_s=(now - t.started_at).total_seconds() if t.started_at else 0.0,
            cost_usd=t.cost_usd,
        )
        for t in tasks
        if t.outcome != "merged"
    ]


def _one_line(text: str) -> str:
    flat = " ".join(text.split())
    return flat if len(flat) <= DETAIL_CHARS else flat[: DETAIL_CHARS - 1] + "…"


def transition_detail(entry: HistoryEntry) -> str:
    """What a transition line adds to its event: the role a follow-up went to, the
    question asked, or why an agent failed (exit code, stderr, stuck timeout)."""
    detail: dict[str, Any] = entry.detail
    sig = detail.get("signal") or {}
    if sig.get("signal") == "needs-role-followup":
        return _one_line(f"to {sig.get('targetRole')}: {sig.get('reason', '')}")
    if sig.get("signal") == "needs-user-input":
        return _one_line(f"asks: {sig.get('question', '')}")
    reason = detail.get("reason")
    return _one_line(str(reason)) if reason else ""


class Reporter:
    def __init__(self, stream: TextIO | None = None, *, color: bool | None = None) -> None:
        self.stream = stream or sys.stdout
        self.color = self.stream.isatty() if color is None else color
        self.started = time.monotonic()
        self._live: Live | None = None

    def _emit(self, text: str, style: str = "") -> None:
        stamp = f"{time.monotonic() - self.started:7.1f}s"
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

    def transition(
        self, step: str, source: str | None, target: str | None, event: str, detail: str = ""
    ) -> None:
        tail = f": {detail}" if detail else ""
        if source == target:
            self._emit(f"{step}: {event} (stays {target}){tail}", "warn" if tail else "dim")
        else:
            style = "ok" if target == "Idle" else ""
            self._emit(f"{step}: {source} -> {target} ({event}){tail}", style)

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
