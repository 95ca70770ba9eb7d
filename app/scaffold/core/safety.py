"""Safety limits of one scaffold run: cost, time, consecutive failures, abort.

Before a task leaves Ready the orchestrator asks :func:`check` whether the run is
still within ``safety.*`` of ``.github/scaffold.yml``: ``max_cost_usd`` (the summed
cost agent runs report), ``max_hours`` (wall-clock time since the run started) and
``max_consecutive_failures`` (agent runs or attempts that ended in error; any success
resets the count), or a person aborted (sticky, first reason kept). A limit is hit
when the figure *reaches* it. Then no new task starts (Ready tasks go back to Idle on
``safety_limit_hit`` or ``abort_signal``); on a budget limit running agents finish
their current run, on an abort they are stopped. The verdict's ``reason`` is a
sentence for a person and ``limit`` names the rule. Pure: the time is passed in.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from enum import StrEnum

from scaffold.config import SafetyConfig


class Limit(StrEnum):
    """Which rule stopped the run; stable names, written to the quest file."""

    ABORT = "abort"
    COST = "cost"
    TIME = "time"
    CONSECUTIVE_FAILURES = "consecutive_failures"


@dataclass(frozen=True)
class SafetyLedger:
    """What the run has used so far.

    ``started_at`` must be timezone-aware (the quest file stores UTC instants;
    mixing naive and aware times would fail only later, at a subtraction).
    """

    cost_usd: float
    started_at: datetime
    consecutive_failures: int = 0
    aborted: bool = False
    abort_reason: str | None = None

    def __post_init__(self) -> None:
        _require_aware(self.started_at, "started_at")
        if not math.isfinite(self.cost_usd) or self.cost_usd < 0:
            raise ValueError(f"cost_usd must be a finite number >= 0, got {self.cost_usd!r}")
        if self.consecutive_failures < 0:
            raise ValueError(
                f"consecutive_failures must be >= 0, got {self.consecutive_failures!r}"
            )


@dataclass(frozen=True)
class SafetyVerdict:
    """``ok`` or why not: ``reason`` is a sentence for a person, ``limit`` the rule."""

    ok: bool
    reason: str | None = None
    limit: Limit | None = None


def elapsed(ledger: SafetyLedger, now: datetime) -> timedelta:
    """Wall-clock time used; a clock that went backwards counts as no time."""
    _require_aware(now, "now")
    return max(now - ledger.started_at, timedelta(0))


def check(limits: SafetyConfig, ledger: SafetyLedger, now: datetime) -> SafetyVerdict:
    """May a new task start? The first rule hit wins: abort, cost, time, failures."""
    if ledger.aborted:
        reason = f"aborted: {ledger.abort_reason}" if ledger.abort_reason else "aborted by a person"
        return SafetyVerdict(ok=False, reason=reason, limit=Limit.ABORT)
    if ledger.cost_usd >= limits.max_cost_usd:
        return SafetyVerdict(
            ok=False,
            reason=(
                f"cost budget reached: ${ledger.cost_usd:,.2f} spent of ${limits.max_cost_usd:,.2f}"
            ),
            limit=Limit.COST,
        )
    used = elapsed(ledger, now)
    budget = timedelta(hours=limits.max_hours)
    if used >= budget:
        return SafetyVerdict(
            ok=False,
            reason=f"time budget reached: {_duration(used)} elapsed of {_duration(budget)}",
            limit=Limit.TIME,
        )
    if ledger.consecutive_failures >= limits.max_consecutive_failures:
        return SafetyVerdict(
            ok=False,
            reason=(
                f"consecutive failure limit reached: {ledger.consecutive_failures}"
                f" failures in a row (limit {limits.max_consecutive_failures})"
            ),
            limit=Limit.CONSECUTIVE_FAILURES,
        )
    return SafetyVerdict(ok=True)


def _require_aware(value: datetime, name: str) -> None:
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{name} must be a timezone-aware datetime, got {value!r}")


def _duration(span: timedelta) -> str:
    """``4 h 00 min``: whole minutes, rounded down (seconds only below a minute)."""
    seconds = int(span.total_seconds())
    if seconds < 60:
        return f"{seconds} s"
    minutes = seconds // 60
    hours, mins = divmod(minutes, 60)
    return f"{hours} h {mins:02d} min"
