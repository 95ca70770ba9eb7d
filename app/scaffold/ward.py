"""Ward: the deterministic checks a repository configures (lint, types, tests).

Ward is not an agent: it runs each configured argv list in the task's
worktree and reports what happened. Decisions:

* Every command runs, even after one fails, and all results are reported:
  Spiritmender fixes more in one pass when it sees the lint errors and the
  test failures together. ``passed`` is true only if every command passed.
* argv lists only, never a shell. A program that cannot be started (missing,
  not executable, empty argv) is a failed command with a clear message
  (exit 127 or 126, like a shell), not an exception.
* Each command gets its own process group and ``timeout_s`` seconds; on
  timeout the whole group gets SIGTERM, then SIGKILL after a short grace.
  Processes a command leaves behind in its group are killed when it ends.
* stdout and stderr share one pipe, so the output keeps its interleaving;
  only the last 20 KB are kept (a failing test run's summary is at the end).
* No configured commands means nothing to fail: ``passed`` is true.
"""

from __future__ import annotations

import contextlib
import os
import shlex
import shutil
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

OUTPUT_TAIL_BYTES = 20 * 1024
# argv and environment -> the sandboxed argv and environment.
CommandWrap = Callable[[Sequence[str], Mapping[str, str]], tuple[list[str], dict[str, str]]]
KILL_GRACE_S = 2.0
# How long to keep reading after a command's group is gone while something that left
# the group still holds the output pipe open.
_DRAIN_AFTER_EXIT_S = 0.5


@dataclass(frozen=True)
class WardCommandResult:
    """One Ward command: its argv, exit code, last output and how long it took.

    ``returncode`` is negative (minus the signal) when the process was killed.
    """

    argv: list[str]
    returncode: int
    output_tail: str
    duration_s: float
    timed_out: bool = False

    @property
    def passed(self) -> bool:
        return self.returncode == 0 and not self.timed_out


@dataclass(frozen=True)
class WardResult:
    passed: bool
    results: list[WardCommandResult] = field(default_factory=list)

    @property
    def failed(self) -> list[WardCommandResult]:
        return [r for r in self.results if not r.passed]


class _Tail:
    """Keeps the last ``limit`` bytes written to it and counts the rest."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.buf = bytearray()
        self.dropped = 0

    def add(self, data: bytes) -> None:
        self.buf += data
        excess = len(self.buf) - self.limit
        if excess > 0:
            del self.buf[:excess]
            self.dropped += excess

    def text(self) -> str:
        body = self.buf.decode("utf-8", errors="replace")
        if self.dropped:
            return f"[... {self.dropped} earlier bytes omitted ...]\n{body}"
        return body


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def _start(
    args: list[str], cwd: Path, env: Mapping[str, str] | None, wrap: CommandWrap | None
) -> subprocess.Popen[bytes] | WardCommandResult:
    """The started command, or the result of a command that could not start."""
    if not args:
        return WardCommandResult(args, 127, "scaffold: empty Ward command", 0.0)
    run_args, run_env = args, (dict(env) if env is not None else None)
    if wrap is not None:
        base = dict(os.environ) if env is None else dict(env)
        if shutil.which(args[0], path=base.get("PATH", os.defpath)) is None:
            return WardCommandResult(args, 127, f"scaffold: command not found: {args[0]}", 0.0)
        run_args, run_env = wrap(args, base)
    try:
        return subprocess.Popen(
            run_args,
            cwd=cwd,
            env=run_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    except FileNotFoundError as exc:
        code = 127
        if not Path(cwd).is_dir():
            reason = f"working directory not found: {cwd}"
        else:
            reason = (
                f"command not found: {args[0] if exc.filename in (None, args[0]) else exc.filename}"
            )
    except PermissionError as exc:
        code, reason = 126, f"cannot execute {args[0]}: {exc}"
    except OSError as exc:
        code, reason = 126, f"cannot start {args[0]}: {exc}"
    return WardCommandResult(args, code, f"scaffold: {reason}", 0.0)


def run_command(
    argv: Sequence[str],
    cwd: Path,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    *,
    kill_grace_s: float = KILL_GRACE_S,
    wrap: CommandWrap | None = None,
) -> WardCommandResult:
    """Run one Ward command; never raises for a command that fails or will not start.

    ``wrap`` turns the argv and environment into the sandboxed ones (see
    ``scaffold.sandbox``); a command that is not there is reported before wrapping.
    """
    args = [str(a) for a in argv]
    start = time.monotonic()
    started = _start(args, cwd, env, wrap)
    if isinstance(started, WardCommandResult):
        return started
    proc = started
    assert proc.stdout is not None
    tail = _Tail(OUTPUT_TAIL_BYTES)
    reader = threading.Thread(target=_read_into, args=(proc.stdout, tail), daemon=True)
    reader.start()
    timed_out = False
    try:
        returncode = proc.wait(timeout=max(0.0, start + timeout_s - time.monotonic()))
    except subprocess.TimeoutExpired:
        timed_out = True
        _kill_group(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=kill_grace_s)
        except subprocess.TimeoutExpired:
            _kill_group(proc.pid, signal.SIGKILL)
        returncode = proc.wait()
    # Whatever the command left running in its group goes too, and lets go of the pipe.
    _kill_group(proc.pid, signal.SIGKILL)
    # A process that left the group may still hold the pipe: its output is not waited for
    # (the reader closes the pipe when that process lets go of it).
    reader.join(_DRAIN_AFTER_EXIT_S)
    duration = time.monotonic() - start
    output = tail.text()
    if timed_out:
        output += f"\n[scaffold: timed out after {timeout_s:g} s; process group killed]"
    return WardCommandResult(args, returncode, output, duration, timed_out)


def _read_into(pipe: IO[bytes], tail: _Tail) -> None:
    with pipe:
        for data in iter(lambda: os.read(pipe.fileno(), 65536), b""):
            tail.add(data)


def run_ward(
    commands: Sequence[Sequence[str]],
    cwd: Path,
    timeout_s: float,
    env: Mapping[str, str] | None = None,
    wrap: CommandWrap | None = None,
) -> WardResult:
    """Run every Ward command in ``cwd`` (``timeout_s`` each) and report all of them.

    ``env`` is the whole environment of the commands (as for ``subprocess``);
    None inherits scaffold's. ``wrap`` sandboxes each command.
    """
    results = [run_command(argv, cwd, timeout_s, env, wrap=wrap) for argv in commands]
    return WardResult(passed=all(r.passed for r in results), results=results)


def format_ward_report(result: WardResult, max_chars: int = 12_000) -> str:
    """A prompt-sized account of a Ward run: one line per command, output of failures.

    The output budget is shared among the failed commands, and each keeps
    the end of its output, where the summary usually is. The whole report
    stays within ``max_chars``.
    """
    failed = result.failed
    verdict = (
        "passed"
        if result.passed
        else f"FAILED ({len(failed)} of {len(result.results)} commands failed)"
    )
    lines = [f"Ward {verdict}."]
    for r in result.results:
        if r.timed_out:
            state = f"TIMED OUT after {r.duration_s:.1f} s"
        elif r.passed:
            state = f"ok in {r.duration_s:.1f} s"
        else:
            state = f"FAILED with exit {r.returncode} in {r.duration_s:.1f} s"
        lines.append(f"- `{shlex.join(r.argv)}`: {state}")
    head = "\n".join(lines)
    if not failed:
        return head[:max_chars]
    sections_budget = max(0, max_chars - len(head))
    per = sections_budget // len(failed)
    parts = [head]
    for r in failed:
        title = f"\n\n### `{shlex.join(r.argv)}` output (last part)\n```\n"
        closing = "\n```"
        room = per - len(title) - len(closing)
        if room <= 0:
            continue
        body = r.output_tail.replace("```", "'''")
        if len(body) > room:
            marker = "[...]\n"
            body = marker + body[-max(0, room - len(marker)) :] if room > len(marker) else ""
        parts.append(title + body + closing)
    return "".join(parts)[:max_chars]
