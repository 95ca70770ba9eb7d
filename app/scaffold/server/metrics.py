"""Prometheus metrics of one server, on its own registry (never the global one)."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

_log = logging.getLogger(__name__)

OUTCOMES = (
    "queued",
    "duplicate",
    "bad_signature",
    "bad_request",
    "too_large",
    "unavailable",
    "handled",
    "failed",
)
UNVERIFIED = "-"  # the event label of requests whose headers cannot be trusted
HANDLE_BUCKETS = (0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1, 5, 30, 120, 600, float("inf"))


@dataclass(frozen=True, slots=True)
class AppGauges:
    quests_by_state: dict[str, int] = field(default_factory=dict)
    busy_slots: int = 0
    cost_usd_total: float = 0.0
    # Repositories by the sandbox their agents run in: bwrap, off, or refused.
    sandbox_modes: dict[str, int] = field(default_factory=dict)
    # 1 when bubblewrap can sandbox agents on this machine.
    sandbox_available: int = 0


class _Live(Collector):
    """Values read when scraped: the queue and whatever the App reports."""

    def __init__(
        self,
        queue_depth: Callable[[], int],
        in_flight: Callable[[], int],
        gauges: Callable[[], AppGauges] | None,
    ) -> None:
        self._queue_depth = queue_depth
        self._in_flight = in_flight
        self._gauges = gauges

    def collect(self) -> Iterator[Metric]:
        yield GaugeMetricFamily(
            "scaffold_queue_depth", "Accepted deliveries waiting for a worker", self._queue_depth()
        )
        yield GaugeMetricFamily(
            "scaffold_webhook_in_flight", "Deliveries being handled now", self._in_flight()
        )
        if self._gauges is None:
            return
        try:
            g = self._gauges()
        except Exception:
            _log.exception("the app's gauges could not be read")
            return
        quests = GaugeMetricFamily("scaffold_quests", "Quests by state", labels=["state"])
        for state, n in sorted(g.quests_by_state.items()):
            quests.add_metric([state], n)
        yield quests
        yield GaugeMetricFamily("scaffold_busy_slots", "Agent slots in use", g.busy_slots)
        yield GaugeMetricFamily(
            "scaffold_cost_usd_total", "Agent cost so far in US dollars", g.cost_usd_total
        )
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


class IngestMetrics:
    def __init__(
        self,
        queue_depth: Callable[[], int],
        in_flight: Callable[[], int],
        gauges: Callable[[], AppGauges] | None = None,
    ) -> None:
        self.registry = CollectorRegistry(auto_describe=True)
        self._deliveries = Counter(
            "scaffold_webhook_deliveries",
            "Webhook deliveries by event and outcome",
            ["event", "outcome"],
            registry=self.registry,
        )
        self.handle_seconds = Histogram(
            "scaffold_webhook_handle_seconds",
            "Time the handler took per delivery",
            buckets=HANDLE_BUCKETS,
            registry=self.registry,
        )
        self.registry.register(_Live(queue_depth, in_flight, gauges))
        self._children: dict[tuple[str, str], Counter] = {}

    def count(self, event: str, outcome: str) -> None:
        key = (event, outcome)
        child = self._children.get(key)
        if child is None:
            child = self._children[key] = self._deliveries.labels(event=event, outcome=outcome)
        child.inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
