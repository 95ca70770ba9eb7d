"""``.github/scaffold.yml``: defaults, and errors that name the file, the key, the line and
what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest
from pydantic import ValidationError

from scaffold.config import (
    CONFIG_PATH,
    DEFAULT_CONFIG_TEXT,
    ScaffoldConfig,
    load_config,
    parse_config,
)
from scaffold.errors import ConfigError

FILE = Path("repo/.github/scaffold.yml")


def refused(text: str) -> ConfigError:
    with pytest.raises(ConfigError) as info:
        parse_config(text, FILE)
    err = info.value
    assert err.exit_code == 2
    assert str(err).startswith(f"{FILE}: ")
    assert err.path == str(FILE)
    return err


def test_defaults() -> None:
    c = ScaffoldConfig()
    assert c.slots == 3
    assert c.trigger_label == "scaffold"
    assert c.agent.backend == "claude"
    assert c.agent.command is None  # the backend's CLI on PATH
    assert c.agent.stuck_timeout_s == 600.0
    assert c.agent.max_attempts == 3
    assert c.ward == ()
    assert (c.safety.max_cost_usd, c.safety.max_hours, c.safety.max_consecutive_failures) == (
        5.0,
        4.0,
        3,
    )
    assert (c.diagrams.architecture, c.diagrams.data_model, c.diagrams.states) == (
        "docs/diagrams/02-architecture.md",
        "docs/diagrams/05-data-model.md",
        "docs/diagrams/03-state-machine.md",
    )
    assert c.diagrams.roadmap == "docs/diagrams/04-roadmap.md"
    assert (c.forge, c.approval, c.merge.method) == ("local", "manual", "merge")


def test_default_config_text_parses_to_the_defaults() -> None:
    assert parse_config(DEFAULT_CONFIG_TEXT) == ScaffoldConfig()


@pytest.mark.parametrize("text", ["", "\n", "# nothing here\n"])
def test_empty_file_is_the_defaults(text: str) -> None:
    assert parse_config(text) == ScaffoldConfig()


def test_config_is_frozen() -> None:
    c = ScaffoldConfig()
    with pytest.raises(ValidationError):
        c.slots = 4  # type: ignore[misc]


def test_values_are_read() -> None:
    c = parse_config(
        "slots: 5\n"
        "agent:\n"
        "  command: python -m fake_agent --fast\n"
        "  stuck_timeout_s: 30\n"
        "ward:\n"
        "  - ruff check .\n"
        "  - [pytest, -q, 'tests/a b']\n"
        "forge: github\n"
        "merge:\n"
        "  method: squash\n"
    )
    assert c.slots == 5
    assert c.agent.command == ("python", "-m", "fake_agent", "--fast")
    assert c.agent.stuck_timeout_s == 30.0
    assert c.ward == (("ruff", "check", "."), ("pytest", "-q", "tests/a b"))
    assert (c.forge, c.merge.method) == ("github", "squash")


def test_unknown_key() -> None:
    err = refused("slots: 3\nslotz: 4\n")
    assert err.key == "slotz (line 2)"
    assert err.reason == "unknown key"


def test_the_removed_learn_estimates_key_is_an_unknown_key() -> None:
    err = refused("slots: 2\nscheduler:\n  learn_estimates: false\n")
    assert err.key == "scheduler (line 2)"
    assert err.reason == "unknown key"


def test_unknown_nested_key_is_dotted() -> None:
    err = refused("agent:\n  command: [claude]\n  stuck_timeout: 5\n")
    assert err.key == "agent.stuck_timeout (line 3)"
    assert "unknown key" in str(err)


def test_wrong_type() -> None:
    err = refused("slots: three\n")
    assert err.key == "slots (line 1)"
    assert err.reason == "expected an integer, got str 'three'"
    assert str(err) == f"{FILE}: slots (line 1): expected an integer, got str 'three'"


@pytest.mark.parametrize(
    ("text", "key", "expected"),
    [
        ("agent:\n  stuck_timeout_s: soon\n", "agent.stuck_timeout_s (line 2)", "a number"),
        ("safety:\n  max_cost_usd: '5'\n", "safety.max_cost_usd (line 2)", "a number"),
        ("slots: '3'\n", "slots (line 1)", "an integer"),
        ("slots: true\n", "slots (line 1)", "an integer"),
        ("slots: 2.5\n", "slots (line 1)", "an integer"),
        ("trigger_label: 5\n", "trigger_label (line 1)", "a string"),
        ("agent: claude\n", "agent (line 1)", "a mapping"),
        ("ward: ruff\n", "ward (line 1)", "a list"),
    ],
)
def test_wrong_types_name_the_expected_type(text: str, key: str, expected: str) -> None:
    err = refused(text)
    assert err.key == key
    assert f"expected {expected}" in err.reason


def test_bad_literal() -> None:
    err = refused("forge: gitlab\n")
    assert err.key == "forge (line 1)"
    assert err.reason == "expected 'local' or 'github', got 'gitlab'"


def test_bad_nested_literal() -> None:
    err = refused("merge:\n  method: fast-forward\n")
    assert err.key == "merge.method (line 2)"
    assert "'merge', 'squash' or 'rebase'" in err.reason


@pytest.mark.parametrize(
    ("text", "key"),
    [
        ("slots: 0\n", "slots (line 1)"),
        ("slots: 65\n", "slots (line 1)"),
        ("safety:\n  max_hours: 0\n", "safety.max_hours (line 2)"),
        ("agent:\n  command: []\n", "agent.command (line 2)"),
        ("trigger_label: ''\n", "trigger_label (line 1)"),
    ],
)
def test_out_of_range(text: str, key: str) -> None:
    assert refused(text).key == key


def test_bad_item_in_a_list_names_its_index() -> None:
    err = refused("ward:\n  - [ruff, check]\n  - 5\n")
    assert err.key.startswith("ward.1")
    assert "(line 3)" in err.key


def test_bad_yaml() -> None:
    err = refused("slots: [3\n")
    assert err.key == ""
    assert err.reason.startswith("not valid YAML")


@pytest.mark.parametrize("text", ["- slots\n- 3\n", "just a string\n", "42\n"])
def test_top_level_must_be_a_mapping(text: str) -> None:
    err = refused(text)
    assert err.key == ""
    assert "expected a mapping at the top" in err.reason


def test_load_config_without_a_file_is_the_defaults(tmp_path: Path) -> None:
    assert load_config(tmp_path) == ScaffoldConfig()


def test_load_config_reads_the_working_tree(tmp_path: Path) -> None:
    path = tmp_path / CONFIG_PATH
    path.parent.mkdir(parents=True)
    path.write_text("slots: 2\napproval: auto\n", encoding="utf-8")
    c = load_config(tmp_path)
    assert (c.slots, c.approval) == (2, "auto")


def test_load_config_names_the_file(tmp_path: Path) -> None:
    path = tmp_path / CONFIG_PATH
    path.parent.mkdir(parents=True)
    path.write_text("approval: sometimes\n", encoding="utf-8")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert info.value.path == str(path)
    assert str(info.value).startswith(f"{path}: approval (line 1): expected 'manual' or 'auto'")


def test_load_config_refuses_an_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / CONFIG_PATH
    path.parent.mkdir(parents=True)
    path.write_bytes(b"slots: \xff\xfe\n")
    with pytest.raises(ConfigError) as info:
        load_config(tmp_path)
    assert "cannot read" in info.value.reason
