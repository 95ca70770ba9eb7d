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

# Seed 002, "Can signal" for each role.
ALLOWED_SIGNALS: dict[Role, frozenset[str]] = {
    Role.CHAOSWHISPERER: frozenset({"complete", "needs-user-input"}),
    Role.PATHSEEKER: frozenset(
        {"complete", "partially-complete", "needs-user-input", "needs-role-followup"}
    ),
    Role.CODEWEAVER: frozenset(
        {"complete", "partially-complete", "needs-user-input", "needs-role-followup"}
    ),
    Role.SIEGEMASTER: frozenset({"complete", "partially-complete", "needs-role-followup"}),
    Role.LAWBRINGER: frozenset({"complete", "needs-role-followup"}),
    Role.SPIRITMENDER: frozenset(
        {"complete", "partially-complete", "needs-user-input", "needs-role-followup"}
    ),
}

# Roles that change code run while a task is Processing; the others validate it.
BUILDING_ROLES = frozenset({Role.PATHSEEKER, Role.CODEWEAVER, Role.SPIRITMENDER})
