"""The environment every git call runs with."""

from __future__ import annotations

import os
from collections.abc import Mapping

GIT = "git"

# Inherited variables that would silently point git at another repository or
# index (they are set, for example, when scaffold runs inside a git hook).
REPO_REDIRECTING_VARS = (
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_COMMON_DIR",
    "GIT_NAMESPACE",
    "GIT_PREFIX",
)


def git_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The environment for a git call: the caller's, minus repository redirects."""
    env = {k: v for k, v in os.environ.items() if k not in REPO_REDIRECTING_VARS}
    env["GIT_TERMINAL_PROMPT"] = "0"
    if extra:
        env.update(extra)
    return env
