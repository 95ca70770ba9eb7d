"""The parts of Backlog.md's ``config.yml`` that scaffold depends on.

Statuses decide what "ready" and "done" mean (the first/default status is
where work waits, the last one is Done, as in the tool); the task prefix and
zero padding decide ids and file names. A missing config means the tool's
defaults; an unreadable one is reported and the defaults are used.
"""

from __future__ import annotations

import stat
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ruamel.yaml import YAML
from ruamel.yaml.error import YAMLError

from scaffold.errors import BacklogError
from scaffold.fsutil import racy

DEFAULT_STATUSES = ("To Do", "In Progress", "Done")
DEFAULT_PRIORITIES = ("high", "medium", "low")
BACKLOG_DIR_NAMES = ("backlog", ".backlog")
ROOT_CONFIG = "backlog.config.yml"


def status_key(status: str) -> str:
    """How the tool compares statuses: trimmed, case-insensitive."""
    return status.strip().lower()


@dataclass(frozen=True, slots=True)
class BacklogConfig:
    statuses: tuple[str, ...] = DEFAULT_STATUSES
    default_status: str = DEFAULT_STATUSES[0]
    task_prefix: str = "task"
    zero_padded_ids: int = 0
    priorities: tuple[str, ...] = DEFAULT_PRIORITIES

    def is_known_status(self, status: str) -> bool:
        return status_key(status) in {status_key(s) for s in self.statuses}

    def is_done_status(self, status: str) -> bool:
        """The last configured status is the one the tool treats as finished."""
        return status_key(status) == status_key(self.statuses[-1])

    def is_default_status(self, status: str) -> bool:
        return status_key(status) == status_key(self.default_status)


def _root_config_dir(root: Path) -> Path | None:
    """The folder named by ``backlog_directory`` in a root ``backlog.config.yml``, if any."""
    path = root / ROOT_CONFIG
    if not path.is_file():
        return None
    name = "backlog"
    try:
        data = _load_yaml(path)
    except (YAMLError, UnicodeDecodeError, OSError):
        data = None
    if isinstance(data, Mapping) and isinstance(data.get("backlog_directory"), str):
        name = data["backlog_directory"].strip() or name
    candidate = (root / name).resolve()
    if not candidate.is_relative_to(root.resolve()):
        raise BacklogError(path, f"backlog_directory {name!r} is outside the repository")
    return candidate


def find_backlog_dir(root: Path) -> Path:
    """The Backlog.md folder for ``root``.

    In order: the ``backlog_directory`` of a root ``backlog.config.yml``,
    ``root/backlog``, ``root/.backlog``, or ``root`` itself when it holds
    ``config.yml`` and ``tasks/`` (a backlog folder was passed directly).
    """
    named = _root_config_dir(root)
    if named is not None and named.is_dir():
        return named
    for name in BACKLOG_DIR_NAMES:
        candidate = root / name
        if candidate.is_dir():
            return candidate
    if (root / "config.yml").is_file() and (root / "tasks").is_dir():
        return root
    raise BacklogError(root, "no Backlog.md folder here (expected backlog/; run 'backlog init')")


def config_path(backlog_dir: Path) -> Path:
    """``config.yml`` in the backlog folder, or the root ``backlog.config.yml`` beside it."""
    inside = backlog_dir / "config.yml"
    if inside.is_file():
        return inside
    beside = backlog_dir.parent / ROOT_CONFIG
    return beside if beside.is_file() else inside


def _str_list(value: Any) -> tuple[str, ...] | None:
    if not isinstance(value, list) or not value:
        return None
    items = tuple(str(v).strip() for v in value if v is not None and str(v).strip())
    return items or None


def parse_config(data: Mapping[str, Any]) -> tuple[BacklogConfig, list[str]]:
    """Build the config from parsed YAML; returns it with a list of problems found."""
    problems: list[str] = []
    statuses: tuple[str, ...] = DEFAULT_STATUSES
    if "statuses" in data:
        parsed = _str_list(data["statuses"])
        if parsed is None:
            problems.append("'statuses' must be a non-empty list; using the defaults")
        else:
            statuses = parsed
    default_status = statuses[0]
    raw_default = data.get("default_status")
    if raw_default is not None:
        wanted = str(raw_default).strip()
        match = [s for s in statuses if status_key(s) == status_key(wanted)]
        if match:
            default_status = match[0]
        else:
            problems.append(
                f"'default_status' {wanted!r} is not one of the statuses; using {default_status!r}"
            )
    prefix = str(data.get("task_prefix") or "task").strip()
    if not prefix.isalpha() or not prefix.isascii():
        problems.append(f"'task_prefix' {prefix!r} must be letters only; using 'task'")
        prefix = "task"
    padding_raw = data.get("zero_padded_ids", 0) or 0
    padding = padding_raw if isinstance(padding_raw, int) and padding_raw >= 0 else 0
    priorities = _str_list(data.get("priorities")) or DEFAULT_PRIORITIES
    config = BacklogConfig(
        statuses=statuses,
        default_status=default_status,
        task_prefix=prefix.lower(),
        zero_padded_ids=padding,
        priorities=tuple(p.lower() for p in priorities),
    )
    return config, problems


def _load_yaml(path: Path) -> Any:
    return YAML(typ="safe", pure=True).load(path.read_bytes().decode("utf-8"))


# Read with the backlog on every turn of the orchestrator's loop: parsed again only when
# the file (inode, size, modification time) changed.
_LOADED: dict[tuple[str, int, int, int], tuple[BacklogConfig, tuple[str, ...]]] = {}


def load_config(backlog_dir: Path) -> tuple[BacklogConfig, list[str]]:
    """Read the config (see :func:`config_path`); absent means defaults, unreadable is reported."""
    path = config_path(backlog_dir)
    try:
        st = path.stat()
    except OSError:
        return BacklogConfig(), []
    if not stat.S_ISREG(st.st_mode):
        return BacklogConfig(), []
    key = (str(path), st.st_ino, st.st_mtime_ns, st.st_size)
    if key not in _LOADED:
        read, found = _read_config(path)
        if racy(st.st_mtime_ns):
            return read, found
        if len(_LOADED) >= 256:
            _LOADED.clear()
        _LOADED[key] = read, tuple(found)
    config, problems = _LOADED[key]
    return config, list(problems)


def _read_config(path: Path) -> tuple[BacklogConfig, list[str]]:
    try:
        data = _load_yaml(path)
    except (YAMLError, UnicodeDecodeError, OSError) as exc:
        reason = " ".join(str(exc).split())
        return BacklogConfig(), [f"cannot read config ({reason}); using the defaults"]
    if data is None:
        return BacklogConfig(), []
    if not isinstance(data, Mapping):
        return BacklogConfig(), ["config is not a mapping of keys to values; using the defaults"]
    return parse_config(data)
