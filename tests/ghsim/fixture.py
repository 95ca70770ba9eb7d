"""The ``github_sim`` pytest fixture: a running simulator that fails the test on any violation.

Use it with ``from ghsim.fixture import github_sim  # noqa: F401`` in a test module or a
conftest.py, or list ``"ghsim.fixture"`` in ``pytest_plugins``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path

import pytest

from .server import GitHubSimulator

WEBHOOK_SECRET = "ghsim-test-secret"


@pytest.fixture
def github_sim(tmp_path: Path) -> Iterator[GitHubSimulator]:
    with GitHubSimulator(tmp_path / "ghsim", webhook_secret=WEBHOOK_SECRET) as sim:
        yield sim
        # A receiver living on the (now stopped) test loop cannot answer any more, so
        # deliveries still queued at teardown are left to fail; they are not violations.
        with contextlib.suppress(TimeoutError):
            sim.wait_deliveries(timeout=5)
    if sim.violations:
        pytest.fail("GitHub simulator violations:\n" + "\n".join(sim.violations), pytrace=False)
