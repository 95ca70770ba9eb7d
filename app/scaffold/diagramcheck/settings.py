"""What DiagramCheck reads of the configuration, without the configuration's machinery.

:data:`DEFAULTS` holds the defaults of ``diagrams`` (``DiagramsConfig`` takes them from
here) and :func:`read_settings` reads that section with the same checks: a repository
with or without ``.github/scaffold.yml`` is checked without loading pydantic, which
keeps ``scaffold diagram-check`` quick to start.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, TypeAlias

from scaffold.diagramcheck.paths import normalize_path

if TYPE_CHECKING:
    from scaffold.config import DiagramsConfig

# Where the configuration lives (scaffold.config.CONFIG_PATH, without importing it).
CONFIG_FILE = ".github/scaffold.yml"


@dataclass(frozen=True)
class DefaultSettings:
    architecture: str = "docs/diagrams/02-architecture.md"
    data_model: str = "docs/diagrams/05-data-model.md"
    states: str = "docs/diagrams/03-state-machine.md"
    roadmap: str = "docs/diagrams/04-roadmap.md"
    # Folders holding importable code (``src``, ``app``); empty: every folder, with
    # dotted names worked out from ``__init__.py`` files.
    source_roots: tuple[str, ...] = ()
    # Paths DiagramCheck never reads (gitignore-style globs; no ``/`` matches any depth).
    ignore: tuple[str, ...] = (
        "tests/**",
        "test/**",
        "**/tests/**",
        "test_*.py",
        "*_test.py",
        "conftest.py",
        "bench/**",
        "benchmarks/**",
        "scripts/**",
        "examples/**",
        "setup.py",
        "noxfile.py",
        # Sphinx configuration: a build script of the docs, not a module of the code.
        "docs/conf.py",
        "doc/conf.py",
    )
    # Which classes belong on the data-model diagram (globs); empty: all of them.
    data_model_sources: tuple[str, ...] = ()
    # An Enum whose name ends like this is a state machine's states.
    state_enum_suffixes: tuple[str, ...] = ("State", "Status")


DEFAULTS = DefaultSettings()

# What the rules read: these settings, or the configuration's ``diagrams``.
DiagramSettings: TypeAlias = "DefaultSettings | DiagramsConfig"


def diagram_paths(cfg: DiagramSettings) -> tuple[str, ...]:
    """The configured diagram files, normalized, without duplicates."""
    paths = (cfg.architecture, cfg.data_model, cfg.states, cfg.roadmap)
    return tuple(dict.fromkeys(normalize_path(p) for p in paths))


_PATH_FIELDS = ("architecture", "data_model", "states", "roadmap")
_LIST_FIELDS = ("source_roots", "ignore", "data_model_sources", "state_enum_suffixes")


def read_settings(text: str, where: str) -> DefaultSettings:
    """``diagrams`` of a ``.github/scaffold.yml`` text, checked like ``DiagramsConfig`` does
    (the other commands check the rest of the file); a ConfigError names the key and line."""
    from dataclasses import replace

    from ruamel.yaml import YAML
    from ruamel.yaml.error import YAMLError

    from scaffold.errors import ConfigError

    try:
        doc = YAML(typ="rt").load(text)
    except YAMLError as exc:
        raise ConfigError(where, "", f"not valid YAML: {exc}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(where, "", f"expected a mapping at the top, got {type(doc).__name__}")
    if "diagrams" not in doc:
        return DEFAULTS
    section = doc["diagrams"]
    if not isinstance(section, dict):
        raise ConfigError(where, _at(doc, "diagrams"), f"expected a mapping, got {_got(section)}")
    values: dict[str, object] = {}
    for key, value in section.items():
        name = str(key)
        loc = _at(section, key, f"diagrams.{name}")
        if name in _PATH_FIELDS:
            if not isinstance(value, str):
                raise ConfigError(where, loc, f"expected a string, got {_got(value)}")
            values[name] = str(value)
        elif name in _LIST_FIELDS:
            if not isinstance(value, list | tuple):
                raise ConfigError(where, loc, f"expected a list, got {_got(value)}")
            for i, item in enumerate(value):
                if not isinstance(item, str):
                    at = _at(value, i, f"diagrams.{name}.{i}", item=True)
                    raise ConfigError(where, at, f"expected a string, got {_got(item)}")
            values[name] = tuple(str(v) for v in value)
        else:
            raise ConfigError(where, loc, "unknown key")
    return replace(DEFAULTS, **values)  # type: ignore[arg-type]


def _got(value: object) -> str:
    plain = value if isinstance(value, bool | int | float | type(None)) else str(value)
    return f"{type(value).__name__} {plain!r}"


def _at(node: object, key: object, dotted: str | None = None, item: bool = False) -> str:
    """``dotted`` (or ``key``) with the line ruamel saw it on, when it knows."""
    name = dotted or str(key)
    lc = getattr(node, "lc", None)
    try:
        line = (lc.item(key) if item else lc.key(key))[0] + 1 if lc is not None else None
    except (KeyError, IndexError, AttributeError, TypeError):
        line = None
    return f"{name} (line {line})" if line else name
