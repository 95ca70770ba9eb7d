"""The ``.github/scaffold.yml`` configuration, read once into a frozen object.

Every key has a default, so an absent file is a valid configuration. Unknown keys
and wrong types are refused with a :class:`ConfigError` naming the file, the key
(dotted, e.g. ``agent.stuck_timeout_s``), the line where known, and what was expected.
"""

from __future__ import annotations

import re
import shlex
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from scaffold.diagramcheck.settings import DEFAULTS as _DIAGRAMS
from scaffold.errors import ConfigError, InvalidIdError
from scaffold.ids import validate_state_branch

CONFIG_PATH = Path(".github/scaffold.yml")

PositiveInt = Annotated[int, Field(ge=1)]


class _Section(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, strict=True)


BackendName = Literal["claude", "codex", "gemini"]
RoleName = Literal[
    "chaoswhisperer", "pathseeker", "codeweaver", "siegemaster", "lawbringer", "spiritmender"
]
NonNegative = Annotated[float, Field(ge=0)]


def _listed(value: Any) -> Any:
    return tuple(value) if isinstance(value, list) else value


def _argv(value: Any) -> Any:
    return tuple(shlex.split(value)) if isinstance(value, str) else _listed(value)


def _program_named(value: tuple[str, ...] | None) -> tuple[str, ...] | None:
    if value is not None and (not value or not value[0]):
        raise ValueError("must name a program")
    return value


class RoleAgentConfig(_Section):
    """``agent.roles.<role>``: what differs for one role; unset keys follow ``agent``."""

    backend: BackendName | None = None
    command: tuple[str, ...] | None = None
    model: str | None = None
    max_turns: PositiveInt | None = None
    extra_args: tuple[str, ...] | None = None

    _command_argv = field_validator("command", "extra_args", mode="before")(_argv)
    _command_named = field_validator("command")(_program_named)


class PriceConfig(_Section):
    """``agent.prices.<model>``: dollars per million tokens."""

    input_per_mtok: NonNegative
    output_per_mtok: NonNegative
    # Prompt tokens read from the provider's cache; unset: charged as input.
    cached_input_per_mtok: NonNegative | None = None


class AgentConfig(_Section):
    # Which agent CLI runs (``scaffold.agent.choice``); per role in ``roles``.
    backend: BackendName = "claude"
    # The argv of ``backend``'s program; unset: the CLI's name on PATH (claude, codex, gemini).
    command: tuple[str, ...] | None = None
    stuck_timeout_s: Annotated[float, Field(gt=0)] = 600.0
    max_attempts: PositiveInt = 3
    # The model of roles on ``backend``; unset: the backend's default.
    model: str | None = None
    max_turns: PositiveInt | None = None
    # Extra arguments appended to every agent invocation (argv, never a shell string).
    extra_args: tuple[str, ...] = ()
    roles: dict[RoleName, RoleAgentConfig] = {}
    prices: dict[str, PriceConfig] = {}

    _command_argv = field_validator("command", "extra_args", mode="before")(_argv)
    _command_named = field_validator("command")(_program_named)


class SafetyConfig(_Section):
    """``safety``: the budgets of one run (see ``scaffold.core.safety``)."""

    max_cost_usd: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 5.0
    max_hours: Annotated[float, Field(gt=0, allow_inf_nan=False)] = 4.0
    max_consecutive_failures: PositiveInt = 3


class DiagramsConfig(_Section):
    # The defaults live in scaffold.diagramcheck.settings (read there without pydantic).
    architecture: str = _DIAGRAMS.architecture
    data_model: str = _DIAGRAMS.data_model
    states: str = _DIAGRAMS.states
    roadmap: str = _DIAGRAMS.roadmap
    source_roots: tuple[str, ...] = _DIAGRAMS.source_roots
    ignore: tuple[str, ...] = _DIAGRAMS.ignore
    data_model_sources: tuple[str, ...] = _DIAGRAMS.data_model_sources
    state_enum_suffixes: tuple[str, ...] = _DIAGRAMS.state_enum_suffixes

    _as_tuple = field_validator(
        "source_roots", "ignore", "data_model_sources", "state_enum_suffixes", mode="before"
    )(_listed)


class MergeConfig(_Section):
    method: Literal["merge", "squash", "rebase"] = "merge"


class ReviewConfig(_Section):
    """Rounds of work a task's pull request may ask for (changes requested, ``/scaffold fix``)."""

    max_rounds: Annotated[int, Field(ge=0, le=100)] = 5


class CIConfig(_Section):
    """Fixes of a merge-blocking check that failed on a task's pull request."""

    max_fixes: Annotated[int, Field(ge=0, le=100)] = 2


class ActionsConfig(_Section):
    """``executor: actions``: slot runs as workflow runs of this workflow file."""

    workflow: Annotated[str, Field(pattern=r"^[A-Za-z0-9_.-]+\.ya?ml$")] = "scaffold-slot.yml"
    # Give up on a workflow run that has not finished after this long (counts as a crash).
    timeout_s: Annotated[float, Field(gt=0)] = 3600.0
    # How often the App re-reads a run's status in case its delivery was lost.
    poll_s: Annotated[float, Field(gt=0)] = 30.0


_DOMAIN = r"^[A-Za-z0-9]([A-Za-z0-9-]{0,62}[A-Za-z0-9])?(\.[A-Za-z0-9]([A-Za-z0-9-]{0,62}[A-Za-z0-9])?)*(:[0-9]{1,5})?$"


class SandboxConfig(_Section):
    """Where agents and Ward run (see ``scaffold.sandbox``).

    ``auto`` uses bubblewrap when it works on this machine; the local CLI falls back to
    no sandbox with a warning, while the App and the Action refuse to start agents.
    ``off`` must be written out to run agents unsandboxed there.
    """

    mode: Literal["auto", "bwrap", "off"] = "auto"
    # Hosts an agent may reach besides the model API (``host`` = port 443, or ``host:port``).
    allow_domains: tuple[str, ...] = ()

    _domains_tuple = field_validator("allow_domains", mode="before")(_listed)

    @field_validator("allow_domains")
    @classmethod
    def _domains_valid(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for item in value:
            if not re.match(_DOMAIN, item) or len(item) > 260:
                raise ValueError(f"expected a host name or host:port, got {item!r}")
        return value


class StateConfig(_Section):
    """The state branch: one file per quest, the quests' source of truth (``scaffold.state``)."""

    branch: Annotated[str, Field(min_length=1, max_length=200)] = "scaffold/state"
    # At most this long between two state commits while something changed (persons'
    # waits, merges and the end of a run are committed at once).
    interval_s: Annotated[float, Field(ge=0)] = 5.0

    @field_validator("branch")
    @classmethod
    def _branch_valid(cls, value: str) -> str:
        try:
            return validate_state_branch(value)
        except InvalidIdError:
            raise ValueError(
                f"expected a branch name (letters, digits, _ . / -) outside scaffold/task-*, "
                f"got {value!r}"
            ) from None


class ScaffoldConfig(_Section):
    slots: Annotated[int, Field(ge=1, le=64)] = 3
    trigger_label: Annotated[str, Field(min_length=1)] = "scaffold"
    agent: AgentConfig = AgentConfig()
    ward: tuple[tuple[str, ...], ...] = ()
    ward_timeout_s: Annotated[float, Field(gt=0)] = 900.0
    safety: SafetyConfig = SafetyConfig()
    diagrams: DiagramsConfig = DiagramsConfig()
    forge: Literal["local", "github"] = "local"
    approval: Literal["manual", "auto"] = "manual"
    merge: MergeConfig = MergeConfig()
    review: ReviewConfig = ReviewConfig()
    ci: CIConfig = CIConfig()
    default_branch: str | None = None
    # Where task agents run: here, or as GitHub Actions workflow runs (App mode only).
    executor: Literal["local", "actions"] = "local"
    actions: ActionsConfig = ActionsConfig()
    sandbox: SandboxConfig = SandboxConfig()
    state: StateConfig = StateConfig()

    @field_validator("ward", mode="before")
    @classmethod
    def _ward_argv(cls, value: Any) -> Any:
        return tuple(_argv(item) for item in value) if isinstance(value, list) else value


_TYPE_NAMES = {
    "int_type": "an integer",
    "int_parsing": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "string_type": "a string",
    "bool_type": "true or false",
    "tuple_type": "a list",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def _describe(err: Any) -> str:
    kind = err["type"]
    if kind == "extra_forbidden":
        return "unknown key"
    if kind in _TYPE_NAMES:
        got = type(err.get("input")).__name__
        return f"expected {_TYPE_NAMES[kind]}, got {got} {err.get('input')!r}"
    if kind == "literal_error":
        return f"expected {err['ctx']['expected']}, got {err.get('input')!r}"
    return str(err["msg"])


def _line_of(doc: Any, loc: tuple[Any, ...]) -> int | None:
    node = doc
    line: int | None = None
    for part in loc:
        lc = getattr(node, "lc", None)
        try:
            if lc is not None and isinstance(part, str) and part in node:
                line = lc.key(part)[0] + 1
            elif lc is not None and isinstance(part, int) and part < len(node):
                line = lc.item(part)[0] + 1
            node = node[part]
        except (KeyError, IndexError, TypeError, AttributeError):
            break
    return line


def parse_config(text: str, path: Path | str = CONFIG_PATH) -> ScaffoldConfig:
    yaml = YAML(typ="rt")
    try:
        doc = yaml.load(text)
    except YAMLError as exc:
        raise ConfigError(path, "", f"not valid YAML: {exc}") from None
    if doc is None:
        doc = {}
    if not isinstance(doc, dict):
        raise ConfigError(path, "", f"expected a mapping at the top, got {type(doc).__name__}")
    plain = _to_plain(doc)
    try:
        return ScaffoldConfig.model_validate(plain)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = tuple(p for p in err["loc"] if not (isinstance(p, str) and p.startswith("function-")))
        key = ".".join(str(p) for p in loc)
        line = _line_of(doc, loc)
        where = f"{key} (line {line})" if line else key
        raise ConfigError(path, where, _describe(err)) from None


def _to_plain(node: Any) -> Any:
    if isinstance(node, dict):
        return {str(k): _to_plain(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_to_plain(v) for v in node]
    if isinstance(node, str):
        return str(node)
    if isinstance(node, bool):
        return bool(node)
    if isinstance(node, int):
        return int(node)
    if isinstance(node, float):
        return float(node)
    return node


def load_config(repo_root: Path) -> ScaffoldConfig:
    """Read ``.github/scaffold.yml`` from a working tree; defaults when it is absent."""
    path = repo_root / CONFIG_PATH
    if not path.exists():
        return ScaffoldConfig()
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(path, "", f"cannot read: {exc}") from None
    return parse_config(text, path)


DEFAULT_CONFIG_TEXT = """\
# scaffold configuration. Every key is optional; these are the defaults.
slots: 3                     # agents running at once
trigger_label: scaffold      # the issue label that starts a quest (GitHub App)
agent:
  backend: claude            # claude | codex | gemini (per role: agent.roles.<role>.backend)
  # command: [claude]        # argv of the backend's program (default: its CLI on PATH)
  stuck_timeout_s: 600       # no output for this long -> the agent is stuck and killed
  max_attempts: 3            # crashes/stalls retried (resuming the session) before Blocked
ward: []                     # checks run in the task's worktree, e.g. [[ruff, check, .], [pytest, -q]]
safety:
  max_cost_usd: 5.0
  max_hours: 4.0
  max_consecutive_failures: 3
diagrams:
  architecture: docs/diagrams/02-architecture.md
  data_model: docs/diagrams/05-data-model.md
  states: docs/diagrams/03-state-machine.md
  roadmap: docs/diagrams/04-roadmap.md
forge: local                 # local | github
approval: manual             # manual | auto (local forge only)
merge:
  method: merge              # merge | squash | rebase
review:
  max_rounds: 5              # rounds of requested changes per task, then Blocked
ci:
  max_fixes: 2               # fixes of a failing merge-blocking check per task, then Blocked
sandbox:
  mode: auto                 # auto | bwrap | off: agents and Ward run in a bubblewrap sandbox
  allow_domains: []          # hosts agents may reach besides the model API, e.g. [pypi.org]
"""
