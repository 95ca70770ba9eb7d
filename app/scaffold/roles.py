"""The six agent roles and what each may signal."""

from __future__ import annotations

from enum import StrEnum


class Role(StrEnum):
    CHAOSWHISPERER = "chaoswhisperer"
    PATHSEEKER = "pathseeker"
    CODEWEAVER = "codeweaver"
    SIEGEMASTER = "siegemaster"
    LAWBRINGER = "lawbringer"
    SPIRITMENDER = "spiritmender"

    @property
    def display(self) -> str:
        return _TITLES[self]


_TITLES = {
    Role.CHAOSWHISPERER: "ChaosWhisperer",
    Role.PATHSEEKER: "PathSeeker",
    Role.CODEWEAVER: "Codeweaver",
    Role.SIEGEMASTER: "Siegemaster",
    Role.LAWBRINGER: "Lawbringer",
    Role.SPIRITMENDER: "Spiritmender",
}

_ANY = frozenset({"complete", "partially-complete", "needs-user-input", "needs-role-followup"})
# Seed 002, "Can signal" for each role.
ALLOWED_SIGNALS: dict[Role, frozenset[str]] = {
    Role.CHAOSWHISPERER: frozenset({"complete", "needs-user-input"}),
    Role.PATHSEEKER: _ANY,
    Role.CODEWEAVER: _ANY,
    Role.SIEGEMASTER: _ANY - {"needs-user-input"},
    Role.LAWBRINGER: frozenset({"complete", "needs-role-followup"}),
    Role.SPIRITMENDER: _ANY,
}

# Roles that change code run while a task is Processing; the others validate it.
BUILDING_ROLES = frozenset({Role.PATHSEEKER, Role.CODEWEAVER, Role.SPIRITMENDER})
