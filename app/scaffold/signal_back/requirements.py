"""``write-requirements``: ChaosWhisperer's BDD requirements, checked and stored.

Accepted requirements replace ``requirements.json`` in the run's signal dir; the
orchestrator reads them with :func:`read_requirements`.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import Field, ValidationError

from scaffold.errors import StoreError
from scaffold.quest.model import Context, Requirements
from scaffold.signal_back.planning import (
    REQUIREMENTS_TOOL,
    Problem,
    ToolReply,
    _Input,
    _refusal,
    problems_from,
    read_model,
    write_durably,
)

REQUIREMENTS_FILE = "requirements.json"
DESCRIPTION = (
    "Hand the BDD requirements of this quest to the scaffold orchestrator: contexts "
    "(situations) each with at least one observable (what a person can see). Ids must be "
    "unique (contexts among themselves, observables within their context). Calling it "
    "again replaces the earlier requirements. Call it before signal-back complete."
)


class RequirementsInput(_Input):
    """The arguments of a ``write-requirements`` call."""

    contexts: Annotated[tuple[Context, ...], Field(min_length=1)]


def requirements_problems(requirements: Requirements) -> list[Problem]:
    """What the model's types do not say: at least one context, unique ids, no blank text."""
    problems: list[Problem] = []
    if not requirements.contexts:
        problems.append(Problem("contexts", "at least one context"))
    seen_contexts: dict[str, int] = {}
    for i, ctx in enumerate(requirements.contexts):
        where = f"contexts.{i}"
        problems += _blank(where, ("id", ctx.id), ("description", ctx.description))
        if (first := seen_contexts.setdefault(ctx.id, i)) != i:
            problems.append(Problem(f"{where}.id", f"duplicate id {ctx.id!r} (contexts.{first})"))
        seen_observables: dict[str, int] = {}
        for j, obs in enumerate(ctx.observables):
            at = f"{where}.observables.{j}"
            problems += _blank(at, ("id", obs.id), ("description", obs.description))
            if (first := seen_observables.setdefault(obs.id, j)) != j:
                reason = f"duplicate id {obs.id!r} in this context ({where}.observables.{first})"
                problems.append(Problem(f"{at}.id", reason))
    return problems


def _blank(where: str, *fields: tuple[str, str]) -> list[Problem]:
    return [Problem(f"{where}.{name}", "must not be blank") for name, v in fields if not v.strip()]


def parse_requirements(arguments: Mapping[str, Any] | None) -> Requirements | list[Problem]:
    """The requirements in a ``write-requirements`` call, or every problem with it."""
    try:
        parsed = RequirementsInput.model_validate(dict(arguments or {}))
    except ValidationError as exc:
        return problems_from(exc)
    requirements = Requirements(contexts=parsed.contexts)
    return requirements_problems(requirements) or requirements


def read_requirements(signal_dir: Path | str) -> Requirements | None:
    """The requirements ChaosWhisperer handed over, or None if it never did; StoreError
    (with the path) for a file that is unreadable or not valid requirements."""
    path = Path(signal_dir) / REQUIREMENTS_FILE
    requirements = read_model(path, Requirements, "a requirements file")
    if requirements is not None and (problems := requirements_problems(requirements)):
        raise StoreError(path, f"invalid requirements: {problems[0]}")
    return requirements


def write_requirements_tool(signal_dir: Path, arguments: Mapping[str, Any] | None) -> ToolReply:
    """The ``write-requirements`` tool: check, store durably (replacing earlier ones), confirm."""
    parsed = parse_requirements(arguments)
    if isinstance(parsed, list):
        return _refusal(REQUIREMENTS_TOOL, parsed, "nothing was stored")
    try:
        data = parsed.model_dump_json(indent=2).encode()
        write_durably(signal_dir, REQUIREMENTS_FILE, data)
    except OSError as exc:
        reason = f"storage error: {exc.strerror or exc}"
        return ToolReply(
            f"requirements NOT recorded ({reason}). Call {REQUIREMENTS_TOOL} again.", True
        )
    contexts = len(parsed.contexts)
    observables = sum(len(c.observables) for c in parsed.contexts)
    text = (
        f"requirements recorded: {contexts} context{'s' * (contexts != 1)}, "
        f"{observables} observable{'s' * (observables != 1)} (replacing any earlier version)."
    )
    return ToolReply(text, False)
