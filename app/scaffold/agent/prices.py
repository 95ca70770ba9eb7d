"""What a model's tokens cost, for the backends whose CLI reports tokens but no dollars.

Claude Code reports each run's cost itself. Codex and Gemini report tokens only: the
run's dollars are its tokens at the model's price, from :data:`SHIPPED` (list prices
per million tokens when this table was written) or ``agent.prices.<model>`` in the
configuration, which adds models and overrides these. ``safety.max_cost_usd`` is a
promise, so a quest whose agents would run an unpriced model does not start.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from scaffold.agent.stream import Usage
from scaffold.config import PriceConfig

__all__ = ["SHIPPED", "Price", "cost_usd", "price_of"]


@dataclass(frozen=True)
class Price:
    """Dollars per million tokens; cached input unset means charged as input."""

    input_per_mtok: float
    output_per_mtok: float
    cached_input_per_mtok: float | None = None


SHIPPED: Mapping[str, Price] = {
    "claude-sonnet-4-5": Price(3.0, 15.0, 0.30),
    "gpt-5.5": Price(1.25, 10.0, 0.125),
    "gemini-2.5-pro": Price(1.25, 10.0, 0.31),
    "gemini-2.5-flash": Price(0.30, 2.50, 0.075),
}


def price_of(model: str, configured: Mapping[str, PriceConfig]) -> Price | None:
    """The configured price of ``model``, else the shipped one, else None."""
    own = configured.get(model)
    if own is not None:
        return Price(own.input_per_mtok, own.output_per_mtok, own.cached_input_per_mtok)
    return SHIPPED.get(model)


def cost_usd(usage: Usage, price: Price) -> float:
    cached = min(usage.cached_input_tokens, usage.input_tokens)
    cached_rate = (
        price.cached_input_per_mtok
        if price.cached_input_per_mtok is not None
        else price.input_per_mtok
    )
    dollars = (
        (usage.input_tokens - cached) * price.input_per_mtok
        + cached * cached_rate
        + usage.output_tokens * price.output_per_mtok
    )
    return dollars / 1_000_000
