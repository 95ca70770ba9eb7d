"""The one error hierarchy of scaffold.

Every error carries the fields a person needs to act on it; they are translated
into an exit code, an HTTP status or a comment only at the edges.

    ScaffoldError
     +-- ConfigError            .path .key .reason            (exit 2)
     +-- UsageError                                           (exit 2)
     +-- InvalidIdError         .value .kind                  (exit 2)
     +-- SignalError            .field .reason                (tool error to the agent)
     +-- BacklogError           .path .reason                 (reported, never skipped)
     +-- IllegalTransition      .state .event                 (a bug or a stale event)
     +-- StoreError             .path .reason
     |    +-- StoreLocked       .holder_pid
     +-- UnknownQuestion        .question_id                  (exit 2)
     +-- UnknownTask            .task_id                      (exit 2)
     +-- AgentError
     +-- SandboxError           .reason                       (exit 2: no agent starts)
     +-- GitError               .argv .returncode .stderr
"""

from __future__ import annotations

from pathlib import Path


class ScaffoldError(Exception):
    """Base of every error scaffold raises on purpose."""

    exit_code = 1


class ConfigError(ScaffoldError):
    """The configuration file is unreadable or breaks the schema."""

    exit_code = 2

    def __init__(self, path: Path | str, key: str, reason: str) -> None:
        where = f"{path}: {key}" if key else f"{path}"
        super().__init__(f"{where}: {reason}")
        self.path = str(path)
        self.key = key
        self.reason = reason


class UsageError(ScaffoldError):
    """The command line asks for something that cannot be done."""

    exit_code = 2


class InvalidIdError(ScaffoldError):
    """A task id, quest id or branch name is not of the allowed form."""

    exit_code = 2

    def __init__(self, value: str, kind: str) -> None:
        super().__init__(f"invalid {kind}: {value!r}")
        self.value = value
        self.kind = kind


class SignalError(ScaffoldError):
    """A signal-back payload was refused; the reason is meant for the agent."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}" if field else reason)
        self.field = field
        self.reason = reason


class BacklogError(ScaffoldError):
    """A Backlog.md file or the task graph has a problem."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


class IllegalTransition(ScaffoldError):
    """An event arrived that the lifecycle table does not allow in this state."""

    def __init__(self, state: str, event: str, detail: str = "") -> None:
        tail = f" ({detail})" if detail else ""
        super().__init__(f"event {event!r} is not allowed in state {state!r}{tail}")
        self.state = state
        self.event = event
        self.detail = detail


class StoreError(ScaffoldError):
    """The quest store could not read or write its files."""

    def __init__(self, path: Path | str, reason: str) -> None:
        super().__init__(f"{path}: {reason}")
        self.path = str(path)
        self.reason = reason


class StoreLocked(StoreError):
    """Another process holds the quest store's writer lock."""

    def __init__(self, path: Path | str, holder_pid: int | None) -> None:
        who = f"process {holder_pid}" if holder_pid else "another process"
        super().__init__(path, f"locked by {who}; one writer at a time")
        self.holder_pid = holder_pid


class UnknownQuestion(ScaffoldError):
    exit_code = 2

    def __init__(self, question_id: str) -> None:
        super().__init__(f"no pending question with id {question_id!r}")
        self.question_id = question_id


class UnknownTask(ScaffoldError):
    exit_code = 2

    def __init__(self, task_id: str) -> None:
        super().__init__(f"no task with id {task_id!r}")
        self.task_id = task_id


class AgentError(ScaffoldError):
    """The agent program could not be started or misbehaved beyond recovery."""


class SandboxError(ScaffoldError):
    """The sandbox agents must run in cannot be had (or its settings are unsafe)."""

    exit_code = 2

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class GitError(ScaffoldError):
    """A git command failed."""

    def __init__(self, argv: list[str], returncode: int, stderr: str) -> None:
        super().__init__(f"git {' '.join(argv)} failed ({returncode}): {stderr.strip()}")
        self.argv = argv
        self.returncode = returncode
        self.stderr = stderr


class GitHubError(ScaffoldError):
    """A GitHub REST call failed for good (after the retries it deserved)."""

    def __init__(self, method: str, path: str, status: int | None, reason: str) -> None:
        self.method = method
        self.path = path
        self.status = status
        where = f"{method} {path}"
        super().__init__(f"GitHub {where} failed ({status or 'no response'}): {reason}")
