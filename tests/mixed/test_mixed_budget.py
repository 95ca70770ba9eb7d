"""The budget holds across backends: Codeweaver on the real ``codex`` and Siegemaster on
the real ``gemini`` each spend less than ``safety.max_cost_usd``, together more, and the
quest stops there (``stop_limit`` "cost"): Lawbringer, on ``claude``, never starts.

Both CLIs report tokens only; ``agent.prices`` prices their models so that every request
the scripted servers answer costs exactly one dollar.
"""

from __future__ import annotations

import pytest
from mixed_setup import ModelServers

from claude.e2e_project import E2EProject
from codex.responses_server import Usage, When, chain, signal_back
from gemini.gemini_server import Usage as GeminiUsage
from gemini.gemini_server import When as GeminiWhen
from gemini.gemini_server import chain as gemini_chain
from gemini.gemini_server import signal_back as gemini_signal
from scaffold.agent.choice import BACKENDS
from scaffold.runtime.session import BACKLOG_QUEST

pytestmark = pytest.mark.interop

# $50 per million input tokens and $500 per million output tokens: a request of 10,000
# tokens in and 1,000 out is $0.50 + $0.50.
PRICE = {"input_per_mtok": 50.0, "output_per_mtok": 500.0, "cached_input_per_mtok": 0.0}
CODEX_REQUEST = Usage(input_tokens=10_000, output_tokens=1_000)
GEMINI_REQUEST = GeminiUsage(prompt_tokens=10_000, output_tokens=1_000)
# Each run: its signal-back call, then its last word; two requests, two dollars.
RUN_USD = 2.0
MAX_COST_USD = 3.0


def test_codex_and_gemini_runs_together_pass_the_budget(
    codex_bin: str,
    gemini_bin: str,
    claude_bin: str,
    servers: ModelServers,
    project: E2EProject,
) -> None:
    models = {name: BACKENDS[name].default_model for name in ("codex", "gemini")}
    config = {
        "slots": 1,
        "approval": "auto",
        "safety": {"max_cost_usd": MAX_COST_USD},
        "agent": {
            "backend": "codex",
            "command": [codex_bin],
            "max_attempts": 1,
            "prices": dict.fromkeys(models.values(), PRICE),
            "roles": {
                "siegemaster": {"backend": "gemini", "command": [gemini_bin]},
                "lawbringer": {"backend": "claude", "command": [claude_bin]},
            },
        },
    }
    project.build(config, tasks=["Costly notes"])
    servers.openai.add(
        *chain(
            signal_back("complete", summary="notes written"),
            when=When(role="codeweaver", step="TASK-1"),
            name="codeweaver",
            usage=CODEX_REQUEST,
        )
    )
    servers.google.add(
        *gemini_chain(
            gemini_signal("complete", summary="edge cases hold"),
            when=GeminiWhen(role="siegemaster", step="TASK-1"),
            name="siegemaster",
            usage=GEMINI_REQUEST,
        )
    )

    result = project.run()
    servers.check()
    assert servers.unused() == []
    assert result.exit_code == 4, result.output
    assert "cost budget reached" in result.output, result.output
    quest = project.quest(BACKLOG_QUEST)
    assert quest.stop_limit == "cost", quest.stop_reason

    # Each run alone stayed below the budget; the two together passed it.
    assert quest.cost_by_backend == {
        "codex": pytest.approx(RUN_USD),
        "gemini": pytest.approx(RUN_USD),
    }
    assert quest.cost_by_role == {
        "codeweaver": pytest.approx(RUN_USD),
        "siegemaster": pytest.approx(RUN_USD),
    }
    assert RUN_USD < MAX_COST_USD <= quest.cost_usd
    assert quest.cost_usd == pytest.approx(2 * RUN_USD)
    # Nothing started after the run that passed it.
    assert servers.anthropic.requests == []
    assert quest.tasks["TASK-1"].outcome == "aborted"
    assert project.merge_subjects() == []
    assert {r.model for r in servers.google.requests} == {models["gemini"]}
    assert {r.model for r in servers.openai.requests} == {models["codex"]}
