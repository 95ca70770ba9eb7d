"""Prometheus metrics of one server, on its own registry (never the global one).

Counted in plain dicts and lists on the hot path; ``prometheus_client`` is imported
only when ``/metrics`` is first scraped, so a server that is never scraped does not
pay for it (about 2 MB and 15 ms of imports).
"""

from __future__ import annotations

import bisect
import logging
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from prometheus_client.core import Metric

_log = logging.getLogger(__name__)

UNVERIFIED = "-"  # the event label of requests whose headers cannot be trusted
HANDLE_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600, float("inf"))


@dataclass(frozen=True, slots=True)
class AppGauges:
    quests_by_state: dict[str, int] = field(default_factory=dict)
    busy_slots: int = 0
    cost_usd_total: float = 0.0
    # The same dollars by the backend (agent CLI) that spent them.
    cost_usd_by_backend: dict[str, float] = field(default_factory=dict)
    # Repositories by the sandbox their agents run in: bwrap, off, or refused.
    sandbox_modes: dict[str, int] = field(default_factory=dict)
    # 1 when bubblewrap can sandbox agents on this machine.
    sandbox_available: int = 0
    # Agents running now across every repository, and the server-wide cap on them.
    agents_running: int = 0
    max_agents: int = 0
    # Per repository: its quests not yet finished, and its agents running now.
    active_quests_by_repo: dict[str, int] = field(default_factory=dict)
    agents_by_repo: dict[str, int] = field(default_factory=dict)


class IngestMetrics:
    def __init__(
        self,
        queue_depth: Callable[[], int],
        in_flight: Callable[[], int],
        gauges: Callable[[], Awaitable[AppGauges]] | None = None,
    ) -> None:
        """``gauges`` reads the App's state (on the App's loop, off this one) per scrape."""
        self._queue_depth = queue_depth
        self._in_flight = in_flight
        self._gauges = gauges
        self._counts: dict[tuple[str, str], int] = {}
        self._bounds = HANDLE_BUCKETS[:-1]  # the last bucket, +Inf, is the count
        self._buckets = [0] * len(HANDLE_BUCKETS)
        self._handle_sum = 0.0

    def count(self, event: str, outcome: str) -> None:
        key = (event, outcome)
        self._counts[key] = self._counts.get(key, 0) + 1

    def observe_handle(self, seconds: float) -> None:
        self._buckets[bisect.bisect_left(self._bounds, seconds)] += 1
        self._handle_sum += seconds

    async def render(self) -> bytes:
        from prometheus_client import CollectorRegistry, generate_latest

        gauges: AppGauges | None = None
        if self._gauges is not None:
            try:
                gauges = await self._gauges()
            except Exception:
                _log.exception("the app's gauges could not be read")
        registry = CollectorRegistry(auto_describe=True)
        registry.register(_Collector(self, gauges))
        return bytes(generate_latest(registry))

    def collect(self, g: AppGauges | None) -> Iterator[Metric]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
        )

        deliveries = CounterMetricFamily(
            "scaffold_webhook_deliveries",
            "Webhook deliveries by event and outcome",
            labels=["event", "outcome"],
        )
        for (event, outcome), n in sorted(self._counts.items()):
            deliveries.add_metric([event, outcome], n)
        yield deliveries
        cumulative, buckets = 0, []
        for bound, n in zip(HANDLE_BUCKETS, self._buckets, strict=True):
            cumulative += n
            buckets.append(("+Inf" if bound == float("inf") else repr(float(bound)), cumulative))
        yield HistogramMetricFamily(
            "scaffold_webhook_handle_seconds",
            "Time the handler took per delivery",
            buckets=buckets,
            sum_value=self._handle_sum,
        )
        yield GaugeMetricFamily(
            "scaffold_queue_depth", "Accepted deliveries waiting for a worker", self._queue_depth()
        )
        yield GaugeMetricFamily(
            "scaffold_webhook_in_flight", "Deliveries being handled now", self._in_flight()
        )
        if g is None:
            return
        quests = GaugeMetricFamily("scaffold_quests", "Quests by state", labels=["state"])
        for state, n in sorted(g.quests_by_state.items()):
            quests.add_metric([state], n)
        yield quests
        yield GaugeMetricFamily("scaffold_busy_slots", "Agent slots in use", g.busy_slots)
        yield GaugeMetricFamily(
            "scaffold_cost_usd_total", "Agent cost so far in US dollars", g.cost_usd_total
        )
        by_backend = GaugeMetricFamily(
            "scaffold_cost_usd_by_backend",
            "Agent cost so far in US dollars, by the agent CLI that spent it",
            labels=["backend"],
        )
        for backend, usd in sorted(g.cost_usd_by_backend.items()):
            by_backend.add_metric([backend], usd)
        yield by_backend
        sandbox = GaugeMetricFamily(
            "scaffold_sandbox_repositories",
            "Repositories by the sandbox their agents run in (bwrap, off, refused)",
            labels=["mode"],
        )
        for mode in ("bwrap", "off", "refused"):
            sandbox.add_metric([mode], g.sandbox_modes.get(mode, 0))
        yield sandbox
        yield GaugeMetricFamily(
            "scaffold_sandbox_available",
            "1 when bubblewrap can sandbox agents on this machine",
            g.sandbox_available,
        )
        yield GaugeMetricFamily(
            "scaffold_agents_running", "Agents running now, every repository", g.agents_running
        )
        yield GaugeMetricFamily(
            "scaffold_max_agents", "The server-wide cap on agents at once", g.max_agents
        )
        active = GaugeMetricFamily(
            "scaffold_repo_active_quests", "Quests not yet finished, by repository", labels=["repo"]
        )
        for repo, n in sorted(g.active_quests_by_repo.items()):
            active.add_metric([repo], n)
        yield active
        agents = GaugeMetricFamily(
            "scaffold_repo_agents_running", "Agents running now, by repository", labels=["repo"]
        )
        for repo, n in sorted(g.agents_by_repo.items()):
            agents.add_metric([repo], n)
        yield agents


class _Collector:
    """What the registry asks: the metrics of one IngestMetrics, read when scraped."""

    def __init__(self, metrics: IngestMetrics, gauges: AppGauges | None) -> None:
        self._metrics = metrics
        self._gauges = gauges

    def collect(self) -> Iterator[Metric]:
        return self._metrics.collect(self._gauges)
