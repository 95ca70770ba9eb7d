"""The result of a DiagramCheck run: findings and the report that holds them."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any, Literal

Level = Literal["failure", "warning"]


@dataclass(frozen=True)
class Finding:
    """One thing a diagram lacks (or still shows, or cannot be read).

    ``kind`` says what (``module-added``, ``field-retyped``, ``state-removed``,
    ``mermaid-invalid`` ...); ``diagram`` is the diagram file to fix; ``source``
    and ``line`` point at the code (1-based, in the new file; the old file for
    removals); ``name`` is what the diagram must name or drop; ``message`` says
    exactly what to add or remove. ``draft`` holds Mermaid lines that would fix
    it. A ``warning`` never blocks.
    """

    kind: str
    diagram: str
    source: str
    line: int
    name: str
    message: str
    level: Level = "failure"
    draft: tuple[str, ...] = ()

    @property
    def blocking(self) -> bool:
        return self.level == "failure"

    def to_json(self) -> dict[str, Any]:
        fields = asdict(self)
        draft = fields.pop("draft")
        return {**fields, "blocking": self.blocking, "draft": list(draft)}


@dataclass(frozen=True)
class Report:
    """Everything one run found between ``base`` and ``head`` (full commit ids)."""

    base: str
    head: str
    merge_base: str
    findings: tuple[Finding, ...]
    diagrams_checked: tuple[str, ...]

    @property
    def blocking(self) -> bool:
        return any(f.blocking for f in self.findings)

    @property
    def failures(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if f.blocking)

    @property
    def warnings(self) -> tuple[Finding, ...]:
        return tuple(f for f in self.findings if not f.blocking)

    def to_json(self) -> dict[str, Any]:
        """The stable JSON schema of ``scaffold diagram-check --format json``."""
        return {
            "blocking": self.blocking,
            "findings": [f.to_json() for f in self.findings],
            "diagrams_checked": list(self.diagrams_checked),
            "base": self.base,
            "head": self.head,
            "merge_base": self.merge_base,
        }
