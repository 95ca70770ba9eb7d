"""Run one agent process and watch it: the adapter between scaffold and `claude -p`.

`run_agent(spec)` spawns the agent in its own process group (`start_new_session`), with a
scrubbed environment (`agent_environment`: no GitHub or App credential ever reaches an
agent), reads stdout through `StreamDecoder` and keeps the last 64 KiB of stderr.

Every way a run can end leaves no process behind: the agent exits (what is left of its
group, say an MCP server it forgot, is stopped), prints nothing for `stuck_timeout_s`
(the outcome says `stuck`), is asked to stop (`stop_requested`: the outcome says
`stopped`), or the task running `run_agent` is cancelled or `on_event` raises (the group
is stopped before the exception propagates).
"""

from __future__ import annotations

import asyncio
import inspect
import os
import signal
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scaffold.agent.process_group import (
    LiveChildren,
    StopResult,
    WatchedProcess,
    _group_alive,
    _signal_group,
    _wait_exited,
    spawn_watched,
    stop_process_group,
)
from scaffold.agent.stream import (
    DEFAULT_CHUNK_BYTES,
    Event,
    LineParser,
    ResultEvent,
    StreamDecoder,
    StreamSummary,
    parse_line,
)
from scaffold.errors import AgentError

__all__ = [
    "STDERR_TAIL_BYTES",
    "AgentRunOutcome",
    "AgentSpec",
    "OnEvent",
    "agent_environment",
    "is_credential_name",
    "run_agent",
]

STDERR_TAIL_BYTES = 64 * 1024

OnEvent = Callable[[Event], Awaitable[None] | None]

# --- environment --------------------------------------------------------------------

_CREDENTIAL_NAMES = frozenset(
    {
        "GITHUB_TOKEN",
        "GH_TOKEN",
        "GITHUB_PAT",
        "GH_ENTERPRISE_TOKEN",
        "GITHUB_ENTERPRISE_TOKEN",
        "ACTIONS_RUNTIME_TOKEN",
        "ACTIONS_ID_TOKEN_REQUEST_TOKEN",
        "SCAFFOLD_APP_ID",
    }
)
_CREDENTIAL_PREFIXES = ("SCAFFOLD_PRIVATE_KEY", "SCAFFOLD_WEBHOOK_SECRET")
_GITHUB_SECRET_WORDS = ("TOKEN", "SECRET", "KEY")


def is_credential_name(name: str) -> bool:
    """True for an environment variable that may hold a GitHub or App credential
    (whatever its case)."""
    upper = name.upper()
    if upper in _CREDENTIAL_NAMES or upper.startswith(_CREDENTIAL_PREFIXES):
        return True
    return "GITHUB" in upper and any(word in upper for word in _GITHUB_SECRET_WORDS)


def agent_environment(base: Mapping[str, str], extra: Mapping[str, str]) -> dict[str, str]:
    """The environment an agent gets: `base` without credentials, plus the step
    variables `extra` (a credential there is the caller's bug: refused, not dropped)."""
    leaked = sorted(name for name in extra if is_credential_name(name))
    if leaked:
        raise AgentError(f"refusing to pass credential variables to an agent: {leaked}")
    env = {name: value for name, value in base.items() if not is_credential_name(name)}
    env.update(extra)
    return env


# --- spec and outcome ---------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class AgentSpec:
    """How to run one agent process. stdin is always /dev/null."""

    argv: Sequence[str]
    cwd: Path
    env: Mapping[str, str] = field(default_factory=dict)
    stuck_timeout_s: float = 600.0
    terminate_grace_s: float = 5.0
    drain_timeout_s: float = 5.0
    # The environment to scrub; None means os.environ at spawn time.
    base_env: Mapping[str, str] | None = None
    # The agent's output format, line by line (its backend's parser; Claude Code's by default).
    parse: LineParser = parse_line

    def __post_init__(self) -> None:
        object.__setattr__(self, "argv", tuple(self.argv))
        if not self.argv:
            raise AgentError("agent command is empty")
        if self.stuck_timeout_s <= 0:
            raise AgentError(f"stuck_timeout_s must be positive, got {self.stuck_timeout_s}")


@dataclass(frozen=True, slots=True)
class AgentRunOutcome:
    """How a run ended. Exactly one of `exit_code`/`signal` is set once the process
    was reaped; both are None only if it survived SIGKILL (see `stop`)."""

    pid: int
    exit_code: int | None
    signal: int | None
    stuck: bool
    duration_s: float
    summary: StreamSummary
    stderr_tail: str
    # How the process group was stopped after the run: None when the agent and all its
    # children had already gone by themselves.
    stop: StopResult | None = None
    # True when the caller asked for the stop (`stop_requested`).
    stopped: bool = False

    @property
    def session_id(self) -> str | None:
        return self.summary.session_id

    @property
    def result(self) -> ResultEvent | None:
        return self.summary.result

    @property
    def ok(self) -> bool:
        """Exited 0 with a non-error result event. (A missing signal is the caller's
        business: this only says the process itself did not fail.)"""
        res = self.summary.result
        return self.exit_code == 0 and not self.stuck and res is not None and not res.is_error


# --- the runner ---------------------------------------------------------------------


async def run_agent(
    spec: AgentSpec,
    *,
    on_event: OnEvent | None = None,
    children: LiveChildren | None = None,
    stop_requested: asyncio.Event | None = None,
) -> AgentRunOutcome:
    """Run the agent to the end and report how it went (see the module's notes).

    `on_event` gets each event in order (awaited if it returns an awaitable). Raises
    `AgentError` if the process cannot be started.
    """
    return await _AgentRun(spec, on_event, children, stop_requested).run()


@dataclass
class _AgentRun:
    spec: AgentSpec
    on_event: OnEvent | None
    children: LiveChildren | None
    stop_requested: asyncio.Event | None
    stopped: bool = False
    stuck: bool = False
    stop: StopResult | None = None
    last_output: float = 0.0
    stderr_tail: bytearray = field(default_factory=bytearray)
    # A backend whose CLI has no turn limit has its parser count the turns; once it
    # says the limit was passed, the agent is stopped.
    limit_hit: asyncio.Event = field(default_factory=asyncio.Event)

    def __post_init__(self) -> None:
        self.decoder = StreamDecoder(parse=self.spec.parse)

    async def run(self) -> AgentRunOutcome:
        spec = self.spec
        loop = asyncio.get_running_loop()
        env = agent_environment(os.environ if spec.base_env is None else spec.base_env, spec.env)
        started = loop.time()
        try:
            proc = await spawn_watched(
                *spec.argv,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                cwd=spec.cwd,
                env=env,
                start_new_session=True,
            )
        except OSError as exc:
            raise AgentError(
                f"cannot start agent {spec.argv[0]!r} in {spec.cwd}: {exc.strerror or exc}"
            ) from exc
        if self.children is not None:
            self.children.add(proc.pid)
        self.last_output = loop.time()
        assert proc.stdout is not None
        assert proc.stderr is not None
        stdout_task = asyncio.create_task(self._pump_stdout(proc.stdout))
        stderr_task = asyncio.create_task(self._pump_stderr(proc.stderr))
        exit_task = asyncio.create_task(_wait_exited(proc))
        watchdog = asyncio.create_task(self._watchdog())
        requested = asyncio.create_task(self._requested())
        tasks = (stdout_task, stderr_task, exit_task, watchdog, requested)
        try:
            await self._supervise(proc, stdout_task, exit_task, watchdog, requested)
            await self._drain(stdout_task, stderr_task)
        except BaseException:
            # Cancelled, or on_event raised: the group must not outlive us.
            await self._abort(proc)
            raise
        finally:
            for task in tasks:
                task.cancel()
            if proc.returncode is not None and self.children is not None:
                self.children.discard(proc.pid)
        rc = proc.returncode
        return AgentRunOutcome(
            pid=proc.pid,
            exit_code=rc if rc is not None and rc >= 0 else None,
            signal=-rc if rc is not None and rc < 0 else None,
            stuck=self.stuck,
            duration_s=loop.time() - started,
            summary=self.decoder.summary,
            stderr_tail=self.stderr_tail.decode("utf-8", "replace"),
            stop=self.stop,
            stopped=self.stopped,
        )

    async def _supervise(
        self,
        proc: WatchedProcess,
        stdout_task: asyncio.Task[None],
        exit_task: asyncio.Task[None],
        watchdog: asyncio.Task[None],
        requested: asyncio.Task[None],
    ) -> None:
        """Until the leader exits (or is stopped as stuck or on request); then clear
        its group."""
        while not exit_task.done():
            waiters: set[asyncio.Future[Any]] = {exit_task, watchdog, requested}
            if not stdout_task.done():
                waiters.add(stdout_task)
            await asyncio.wait(waiters, return_when=asyncio.FIRST_COMPLETED)
            if stdout_task.done() and stdout_task.exception() is not None:
                stdout_task.result()  # re-raise what on_event raised
            if (watchdog.done() or requested.done()) and not exit_task.done():
                self.stuck = watchdog.done()
                self.stopped = self.stop_requested is not None and self.stop_requested.is_set()
                self.stop = await self._stop_group(proc)
                return
        # The agent is gone; anything left in its group is an orphan (e.g. an MCP server).
        if _group_alive(proc.pid):
            self.stop = await self._stop_group(proc)

    def _stop_group(self, proc: WatchedProcess) -> Awaitable[StopResult]:
        return stop_process_group(proc, terminate_wait_s=self.spec.terminate_grace_s)

    async def _drain(
        self, stdout_task: asyncio.Task[None], stderr_task: asyncio.Task[None]
    ) -> None:
        """Read what is still in the pipes. A process outside the group (one that made
        its own session) could hold them open forever, hence the deadline."""
        done, _ = await asyncio.wait({stdout_task, stderr_task}, timeout=self.spec.drain_timeout_s)
        if stdout_task in done:
            stdout_task.result()

    async def _abort(self, proc: WatchedProcess) -> None:
        stopping = asyncio.ensure_future(self._stop_group(proc))
        try:
            self.stop = await asyncio.shield(stopping)
        except asyncio.CancelledError:
            # Cancelled again while stopping: no more grace. The shielded task goes on
            # and the event loop's child watcher reaps the leader.
            _signal_group(proc.pid, signal.SIGKILL)
            raise

    async def _requested(self) -> None:
        events = (self.limit_hit, self.stop_requested)
        waits = [asyncio.ensure_future(e.wait()) for e in events if e is not None]
        try:
            await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in waits:
                waiter.cancel()

    async def _watchdog(self) -> None:
        """Return once stdout has been silent for stuck_timeout_s."""
        loop = asyncio.get_running_loop()
        timeout = self.spec.stuck_timeout_s
        while True:
            delay = self.last_output + timeout - loop.time()
            if delay <= 0:
                return
            await asyncio.sleep(delay)

    async def _pump_stdout(self, reader: asyncio.StreamReader) -> None:
        loop = asyncio.get_running_loop()
        decoder = self.decoder
        on_event = self.on_event
        while True:
            chunk = await reader.read(DEFAULT_CHUNK_BYTES)
            if not chunk:
                break
            self.last_output = loop.time()
            events = decoder.feed(chunk)
            if any(isinstance(e, ResultEvent) and e.turn_limit_passed for e in events):
                self.limit_hit.set()
            if on_event is not None and events:
                await _deliver(on_event, events)
                # Time spent in our own callback is not the agent's silence.
                self.last_output = loop.time()
        events = decoder.finish()
        if on_event is not None and events:
            await _deliver(on_event, events)

    async def _pump_stderr(self, reader: asyncio.StreamReader) -> None:
        tail = self.stderr_tail
        while True:
            chunk = await reader.read(DEFAULT_CHUNK_BYTES)
            if not chunk:
                return
            tail += chunk
            if len(tail) > STDERR_TAIL_BYTES:
                del tail[: len(tail) - STDERR_TAIL_BYTES]


async def _deliver(on_event: OnEvent, events: list[Event]) -> None:
    for event in events:
        maybe = on_event(event)
        if inspect.isawaitable(maybe):
            await maybe
