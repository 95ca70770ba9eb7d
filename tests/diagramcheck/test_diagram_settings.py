"""DiagramCheck reads ``diagrams`` without pydantic: same values and errors as the config."""

from __future__ import annotations

import dataclasses

import pytest

from scaffold.config import CONFIG_PATH, DiagramsConfig, parse_config
from scaffold.diagramcheck.settings import CONFIG_FILE, DEFAULTS, read_settings
from scaffold.errors import ConfigError

FIELDS = [f.name for f in dataclasses.fields(DEFAULTS)]

CASES = [
    "",
    "agent:\n  command: ['x']\n",
    "diagrams:\n  ignore: ['a/**']\n  source_roots: [app]\n",
    "diagrams:\n  architecture: docs/arch.md\n  state_enum_suffixes: []\n",
    "diagrams:\n  bogus: 1\n",
    "diagrams:\n  architecture: 3\n",
    "diagrams:\n  ignore: [1]\n",
    "diagrams:\n  ignore: x\n",
    "diagrams: 3\n",
    "diagrams:\n",
    "- a\n",
    "a: [\n",
]


def _outcome(read: object) -> object:
    try:
        value = read()  # type: ignore[operator]
    except ConfigError as exc:
        return str(exc)
    return tuple(getattr(value, name) for name in FIELDS)


@pytest.mark.parametrize("text", CASES)
def test_light_reader_agrees_with_the_configuration(text: str) -> None:
    light = _outcome(lambda: read_settings(text, "f"))
    full = _outcome(lambda: parse_config(text, "f").diagrams)
    assert light == full


def test_defaults_are_the_configurations() -> None:
    assert CONFIG_PATH.as_posix() == CONFIG_FILE
    assert _outcome(lambda: DEFAULTS) == _outcome(DiagramsConfig)
