"""Which backend, program and model run a role; what tokens cost; what refuses to start."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from scaffold.agent.choice import agent_for, unpriced
from scaffold.agent.prices import SHIPPED, Price, cost_usd, price_of
from scaffold.agent.stream import Usage
from scaffold.cli.main import cli
from scaffold.config import parse_config
from scaffold.core import quest_flow as qf
from scaffold.errors import ConfigError
from scaffold.quest.model import Quest, TaskRecord
from scaffold.roles import Role
from scaffold.runtime.preflight import require_prices


def test_claude_on_path_with_its_default_model_when_nothing_is_set() -> None:
    agent = agent_for(parse_config("").agent, Role.CODEWEAVER)
    assert agent.backend.name == "claude"
    assert agent.command == ("claude",)
    assert agent.model == agent.backend.default_model


def test_agent_command_and_model_belong_to_agent_backend_and_roles_override() -> None:
    cfg = parse_config(
        "agent:\n"
        "  command: [/opt/claude-wrapper, --quiet]\n"
        "  model: opus\n"
        "  max_turns: 9\n"
        "  extra_args: [--debug]\n"
        "  roles:\n"
        "    lawbringer: {command: /opt/other, model: haiku, max_turns: 3}\n"
    ).agent
    coder = agent_for(cfg, Role.CODEWEAVER)
    assert coder.command == ("/opt/claude-wrapper", "--quiet")
    assert (coder.model, coder.max_turns, coder.extra_args) == ("opus", 9, ("--debug",))
    reviewer = agent_for(cfg, Role.LAWBRINGER)
    assert reviewer.command == ("/opt/other",)
    assert (reviewer.model, reviewer.max_turns, reviewer.extra_args) == ("haiku", 3, ("--debug",))


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("agent:\n  backend: copilot\n", "agent.backend"),
        ("agent:\n  roles:\n    reviewer: {}\n", "agent.roles.reviewer"),
        ("agent:\n  roles:\n    codeweaver: {colour: red}\n", "agent.roles.codeweaver.colour"),
        ("agent:\n  roles:\n    codeweaver: {backend: cursor}\n", "agent.roles.codeweaver.backend"),
        ("agent:\n  prices:\n    m: {input_per_mtok: 1}\n", "agent.prices.m.output_per_mtok"),
        (
            "agent:\n  prices:\n    m: {input_per_mtok: -1, output_per_mtok: 1}\n",
            "agent.prices.m.input_per_mtok",
        ),
        ("agent:\n  roles:\n    codeweaver: {command: []}\n", "agent.roles.codeweaver.command"),
    ],
)
def test_bad_agent_keys_are_config_errors_naming_key_and_line(text: str, key: str) -> None:
    with pytest.raises(ConfigError) as err:
        parse_config(text)
    assert key in str(err.value)
    assert "(line " in str(err.value)


def test_tokens_cost_their_models_price_and_config_overrides_the_table() -> None:
    price = Price(input_per_mtok=2.0, output_per_mtok=10.0, cached_input_per_mtok=0.5)
    usage = Usage(input_tokens=1_000_000, output_tokens=100_000, cached_input_tokens=400_000)
    assert cost_usd(usage, price) == pytest.approx(0.6 * 2.0 + 0.4 * 0.5 + 0.1 * 10.0)
    assert cost_usd(usage, Price(2.0, 10.0)) == pytest.approx(2.0 + 1.0)  # cache: as input
    cfg = parse_config(
        "agent:\n  prices:\n    claude-sonnet-4-5: {input_per_mtok: 1, output_per_mtok: 1}\n"
    ).agent
    assert price_of("claude-sonnet-4-5", cfg.prices) == Price(1.0, 1.0, None)
    assert price_of("claude-sonnet-4-5", {}) == SHIPPED["claude-sonnet-4-5"]
    assert price_of("no-such-model", cfg.prices) is None


def test_a_model_nobody_can_price_refuses_the_quest_naming_the_key(tmp_path: Path) -> None:
    claude_only = parse_config("agent:\n  model: some-new-model\n")
    assert unpriced(claude_only.agent) == []  # Claude Code reports its own dollars
    require_prices(claude_only, tmp_path)


def test_cost_is_summed_by_role_and_by_backend() -> None:
    quest = Quest(id="q", tasks={"TASK-1": TaskRecord(id="TASK-1")})
    quest = qf.add_cost(quest, "TASK-1", 0.25, "codeweaver", "codex")
    quest = qf.add_cost(quest, "TASK-1", 0.5, "lawbringer", "claude")
    quest = qf.add_cost(quest, None, 0.125, "pathseeker", "claude")
    assert quest.cost_usd == pytest.approx(0.875)
    assert quest.cost_by_backend == {"codex": 0.25, "claude": 0.625}
    assert quest.cost_by_role == {"codeweaver": 0.25, "lawbringer": 0.5, "pathseeker": 0.125}
    assert quest.tasks["TASK-1"].cost_usd == pytest.approx(0.75)


def test_an_unpriced_codex_model_refuses_the_quest_with_exit_2(tmp_path: Path) -> None:
    text = (
        "agent:\n  roles:\n"
        "    lawbringer: {backend: codex, model: gpt-unknown, command: [/bin/true]}\n"
    )
    cfg = parse_config(text)
    assert [a.role for a in unpriced(cfg.agent)] == [Role.LAWBRINGER]
    with pytest.raises(ConfigError) as err:
        require_prices(cfg, tmp_path)
    assert "agent.prices.gpt-unknown" in str(err.value)
    priced = parse_config(
        text + "  prices:\n    gpt-unknown: {input_per_mtok: 1, output_per_mtok: 4}\n"
    )
    require_prices(priced, tmp_path)

    repo = tmp_path / "repo"
    (repo / ".github").mkdir(parents=True)
    (repo / ".github" / "scaffold.yml").write_text(
        text.replace("agent:\n", "agent:\n  command: [/bin/true]\n"), encoding="utf-8"
    )
    for args in (["init", "-q", "-b", "main"], ["add", "-A"], ["commit", "-qm", "c"]):
        subprocess.run(
            ["git", "-c", "user.name=t", "-c", "user.email=t@t", *args], cwd=repo, check=True
        )
    result = CliRunner().invoke(cli, ["run", "--repo", str(repo)])
    assert result.exit_code == 2, result.output
    assert "agent.prices.gpt-unknown" in result.output
