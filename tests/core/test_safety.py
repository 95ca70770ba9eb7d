"""Safety limits: cost, time, consecutive failures and abort stop new work, with a reason."""

from __future__ import annotations

import dataclasses
import json
import math
from datetime import UTC, datetime, timedelta, timezone

import pytest

from scaffold.config import SafetyConfig, parse_config
from scaffold.core.safety import (
    Limit,
    SafetyLedger,
    SafetyVerdict,
    check,
    elapsed,
)
from scaffold.errors import ConfigError

T0 = datetime(2025, 1, 1, 9, 0, tzinfo=UTC)
LIMITS = SafetyConfig()


def ledger(**changes: object) -> SafetyLedger:
    return dataclasses.replace(SafetyLedger(cost_usd=0.0, started_at=T0), **changes)  # type: ignore[arg-type]


def test_defaults_follow_the_design() -> None:
    limits = SafetyConfig()
    assert limits.max_cost_usd == 5.0
    assert limits.max_hours == 4.0
    assert limits.max_consecutive_failures == 3


def test_fresh_run_is_ok() -> None:
    assert check(LIMITS, ledger(), T0) == SafetyVerdict(ok=True, reason=None, limit=None)


# --- cost ---------------------------------------------------------------------------


def test_cost_budget_reached_stops_with_a_sentence() -> None:
    verdict = check(LIMITS, ledger(cost_usd=5.02), T0)
    assert verdict == SafetyVerdict(
        ok=False, reason="cost budget reached: $5.02 spent of $5.00", limit=Limit.COST
    )
    assert verdict.limit == "cost"


def test_cost_exactly_at_the_budget_stops() -> None:
    verdict = check(LIMITS, ledger(cost_usd=5.0), T0)
    assert not verdict.ok
    assert verdict.reason == "cost budget reached: $5.00 spent of $5.00"


def test_cost_just_under_the_budget_is_ok() -> None:
    assert check(LIMITS, ledger(cost_usd=4.99), T0).ok


# --- time ---------------------------------------------------------------------------


def test_time_budget_reached_stops() -> None:
    verdict = check(LIMITS, ledger(), T0 + timedelta(hours=4))
    assert verdict == SafetyVerdict(
        ok=False, reason="time budget reached: 4 h 00 min elapsed of 4 h 00 min", limit=Limit.TIME
    )


def test_time_reason_shows_minutes_over() -> None:
    verdict = check(LIMITS, ledger(), T0 + timedelta(hours=4, minutes=7, seconds=30))
    assert verdict.reason == "time budget reached: 4 h 07 min elapsed of 4 h 00 min"


def test_time_reason_below_a_minute_shows_seconds() -> None:
    limits = SafetyConfig(max_hours=10 / 3600)
    verdict = check(limits, ledger(), T0 + timedelta(seconds=12))
    assert verdict.reason == "time budget reached: 12 s elapsed of 10 s"


def test_time_just_under_the_budget_is_ok() -> None:
    assert check(LIMITS, ledger(), T0 + timedelta(hours=3, minutes=59, seconds=59)).ok


def test_time_is_measured_across_time_zones() -> None:
    plus_two = T0.astimezone(timezone(timedelta(hours=2)))
    assert elapsed(ledger(), plus_two + timedelta(hours=1)) == timedelta(hours=1)


def test_clock_going_backwards_counts_as_no_time() -> None:
    assert elapsed(ledger(), T0 - timedelta(hours=1)) == timedelta(0)


def test_naive_datetimes_are_refused() -> None:
    with pytest.raises(ValueError, match="timezone-aware"):
        SafetyLedger(cost_usd=0.0, started_at=datetime(2025, 1, 1))
    with pytest.raises(ValueError, match="timezone-aware"):
        check(LIMITS, ledger(), datetime(2025, 1, 1, 10))


# --- consecutive failures -------------------------------------------------------------


def test_three_failures_in_a_row_stop() -> None:
    for failures in range(3):
        assert check(LIMITS, ledger(consecutive_failures=failures), T0).ok
    assert check(LIMITS, ledger(consecutive_failures=3), T0) == SafetyVerdict(
        ok=False,
        reason="consecutive failure limit reached: 3 failures in a row (limit 3)",
        limit=Limit.CONSECUTIVE_FAILURES,
    )


# --- abort ----------------------------------------------------------------------------


def test_abort_stops_and_records_the_reason() -> None:
    led = ledger(aborted=True, abort_reason="requested by @octocat")
    assert check(LIMITS, led, T0) == SafetyVerdict(
        ok=False, reason="aborted: requested by @octocat", limit=Limit.ABORT
    )


def test_abort_without_a_reason() -> None:
    assert check(LIMITS, ledger(aborted=True), T0).reason == "aborted by a person"


def test_first_rule_hit_wins_abort_cost_time_failures() -> None:
    late = T0 + timedelta(hours=5)
    led = ledger(cost_usd=6.0, consecutive_failures=3)
    aborted = dataclasses.replace(led, aborted=True, abort_reason="stop")
    assert check(LIMITS, aborted, late).limit is Limit.ABORT
    assert check(LIMITS, led, late).limit is Limit.COST
    assert check(LIMITS, ledger(consecutive_failures=3), late).limit is Limit.TIME
    assert check(LIMITS, ledger(consecutive_failures=3), T0).limit is Limit.CONSECUTIVE_FAILURES


# --- values ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "key"),
    [
        ({"max_cost_usd": -1.0}, "max_cost_usd"),
        ({"max_cost_usd": math.nan}, "max_cost_usd"),
        ({"max_hours": math.inf}, "max_hours"),
        ({"max_hours": True}, "max_hours"),
        ({"max_consecutive_failures": 0}, "max_consecutive_failures"),
        ({"max_consecutive_failures": 2.5}, "max_consecutive_failures"),
    ],
)
def test_bad_limits_are_refused(kwargs: dict[str, object], key: str) -> None:
    text = "safety:\n" + "".join(f"  {k}: {json.dumps(v)}\n" for k, v in kwargs.items())
    with pytest.raises(ConfigError) as info:
        parse_config(text.replace("NaN", ".nan").replace("Infinity", ".inf"))
    assert info.value.key == f"safety.{key} (line 2)"


def test_ledger_refuses_impossible_values() -> None:
    with pytest.raises(ValueError, match="cost_usd"):
        SafetyLedger(cost_usd=-1.0, started_at=T0)
    with pytest.raises(ValueError, match="consecutive_failures"):
        SafetyLedger(cost_usd=0.0, started_at=T0, consecutive_failures=-1)
