"""When a failed GitHub call deserves another try, and how long to wait first. Pure.
No response and 5xx back off; secondary rate limits wait ``Retry-After``; a primary
rate limit waits until ``X-RateLimit-Reset`` (within ``max_wait_s``); other 4xx are not
retried.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


@dataclass(frozen=True)
class RetryPolicy:
    max_attempts: int = 6
    base_delay_s: float = 0.5
    max_delay_s: float = 30.0
    # A rate limit that resets later than this is reported rather than waited out.
    max_wait_s: float = 900.0
    timeout_s: float = 30.0


def _backoff(policy: RetryPolicy, attempt: int) -> float:
    # The exponent is bounded: past 2**64 the cap has long applied, and a bigger power
    # would not fit in a float.
    delay: float = policy.base_delay_s * (2.0 ** min(attempt - 1, 64))
    return min(policy.max_delay_s, delay)


def _header(headers: Mapping[str, str], name: str) -> str | None:
    return next((value for key, value in headers.items() if key.lower() == name), None)


def _number(text: str | None) -> float | None:
    if text is None:
        return None
    try:
        return float(text.strip())
    except ValueError:
        return None


def retry_delay(
    policy: RetryPolicy,
    attempt: int,
    status: int | None,
    headers: Mapping[str, str],
    now_epoch: float,
) -> float | None:
    """Seconds to wait before attempt ``attempt + 1``, or None to stop retrying.

    ``attempt`` is the 1-based number of the attempt that just failed; ``status`` is
    None when there was no response.
    """
    if attempt >= policy.max_attempts:
        return None
    if status is None or status >= 500:
        return _backoff(policy, attempt)
    if status not in (403, 429):
        return None
    retry_after = _number(_header(headers, "retry-after"))
    if retry_after is not None:
        return retry_after if 0 <= retry_after <= policy.max_wait_s else None
    if _header(headers, "x-ratelimit-remaining") == "0":
        reset = _number(_header(headers, "x-ratelimit-reset"))
        if reset is None:
            return _backoff(policy, attempt)
        wait = max(0.0, reset - now_epoch) + 1.0
        return wait if wait <= policy.max_wait_s else None
    if status == 429:
        return _backoff(policy, attempt)
    return None  # a plain 403: a permission problem, not a limit


def describe(status: int | None, headers: Mapping[str, str]) -> str:
    """A short reason for logs: which limit or failure this was."""
    if status is None:
        return "no response"
    if _header(headers, "retry-after") is not None:
        return f"secondary rate limit ({status}, Retry-After {_header(headers, 'retry-after')})"
    if _header(headers, "x-ratelimit-remaining") == "0":
        return f"primary rate limit ({status})"
    return f"HTTP {status}"
