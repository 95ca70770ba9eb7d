"""Which backend, program, model and limits run a role: ``agent`` and ``agent.roles``.

``agent.backend`` names the CLI of every role; ``agent.roles.<role>.backend`` another
for one role. ``agent.command``, ``agent.model`` and ``agent.extra_args`` are
``agent.backend``'s (its program, model and flags), so a role moved to another backend
gets that backend's program on PATH and default model unless its own entry names them.
``agent.max_turns`` holds for every role.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

from scaffold.agent.backend import Backend
from scaffold.agent.claude import Claude
from scaffold.agent.codex import Codex
from scaffold.agent.prices import Price, price_of
from scaffold.config import AgentConfig, RoleAgentConfig
from scaffold.roles import Role

__all__ = ["BACKENDS", "RoleAgent", "agent_for", "agents_in_use", "run_price", "unpriced"]

BACKENDS: dict[str, Backend] = {b.name: b for b in (Claude(), Codex())}


@dataclass(frozen=True)
class RoleAgent:
    """How one role's agent runs."""

    role: Role
    backend: Backend
    command: tuple[str, ...]
    model: str
    max_turns: int | None
    extra_args: tuple[str, ...]

    @property
    def config_key(self) -> str:
        """Where the configuration sets this role's agent (for messages)."""
        return f"agent.roles.{self.role.value}"


def agent_for(cfg: AgentConfig, role: Role) -> RoleAgent:
    own = cfg.roles.get(role.value) or RoleAgentConfig()
    name = own.backend or cfg.backend
    backend = BACKENDS[name]
    main = name == cfg.backend
    command = own.command or (cfg.command if main else None) or (backend.program,)
    model = own.model or (cfg.model if main else None) or backend.default_model
    extra = own.extra_args if own.extra_args is not None else (cfg.extra_args if main else ())
    turns = own.max_turns if own.max_turns is not None else cfg.max_turns
    return RoleAgent(role, backend, command, model, turns, extra)


def agents_in_use(cfg: AgentConfig) -> Iterator[RoleAgent]:
    for role in Role:
        yield agent_for(cfg, role)


def unpriced(cfg: AgentConfig) -> list[RoleAgent]:
    """Roles whose backend reports no dollars and whose model has no price."""
    return [
        a
        for a in agents_in_use(cfg)
        if not a.backend.reports_cost and price_of(a.model, cfg.prices) is None
    ]


def run_price(cfg: AgentConfig, agent: RoleAgent) -> Price | None:
    return None if agent.backend.reports_cost else price_of(agent.model, cfg.prices)
