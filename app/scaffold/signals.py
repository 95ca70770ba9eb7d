"""The four ``signal-back`` payloads an agent may send.

Field names are the wire names (camelCase). Unknown fields, a missing field or
a wrong type are refused with a :class:`SignalError` that names the field, so
the agent can correct itself and call the tool again.
"""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError

from scaffold.errors import SignalError
from scaffold.roles import ALLOWED_SIGNALS, Role

NonEmpty = Annotated[str, Field(min_length=1, max_length=20_000)]
StepId = Annotated[str, Field(min_length=1, max_length=200)]


class _Signal(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, str_strip_whitespace=True)


class Complete(_Signal):
    """The step finished successfully."""

    signal: Literal["complete"]
    stepId: StepId
    summary: NonEmpty


class PartiallyComplete(_Signal):
    """The agent ran out of context; the same role continues from ``continuationPoint``."""

    signal: Literal["partially-complete"]
    stepId: StepId
    progress: NonEmpty
    continuationPoint: NonEmpty


class NeedsUserInput(_Signal):
    """Only a person can unblock this; the session resumes with the answer."""

    signal: Literal["needs-user-input"]
    stepId: StepId
    question: NonEmpty
    context: NonEmpty


class NeedsRoleFollowup(_Signal):
    """Another role must act first; ``resume`` says whether this session continues after."""

    signal: Literal["needs-role-followup"]
    stepId: StepId
    targetRole: Literal["pathseeker", "codeweaver", "siegemaster", "lawbringer", "spiritmender"]
    reason: NonEmpty
    context: NonEmpty
    resume: bool

    @property
    def target(self) -> Role:
        return Role(self.targetRole)


AnySignal = Complete | PartiallyComplete | NeedsUserInput | NeedsRoleFollowup
Signal = Annotated[AnySignal, Field(discriminator="signal")]
SIGNAL_TYPES = ("complete", "partially-complete", "needs-user-input", "needs-role-followup")

_ADAPTER: TypeAdapter[AnySignal] = TypeAdapter(Signal)


def signal_json_schema() -> dict[str, Any]:
    return _ADAPTER.json_schema()


def parse_signal(data: Any, *, role: Role | None = None) -> AnySignal:
    """Validate a raw payload; raise :class:`SignalError` naming the first bad field."""
    if not isinstance(data, dict):
        raise SignalError("", f"a signal must be a JSON object, got {type(data).__name__}")
    kind = data.get("signal")
    if kind not in SIGNAL_TYPES:
        raise SignalError("signal", f"must be one of {', '.join(SIGNAL_TYPES)}; got {kind!r}")
    try:
        sig = _ADAPTER.validate_python(data)
    except ValidationError as exc:
        err = exc.errors()[0]
        loc = [str(p) for p in err["loc"] if str(p) not in SIGNAL_TYPES]
        field = ".".join(loc)
        msg = err["msg"]
        if err["type"] == "extra_forbidden":
            msg = f"unknown field for a {kind!r} signal"
        raise SignalError(field, msg) from None
    if role is not None and sig.signal not in ALLOWED_SIGNALS[role]:
        allowed = ", ".join(sorted(ALLOWED_SIGNALS[role]))
        raise SignalError(
            "signal", f"{role.display} may not signal {sig.signal!r}; it may: {allowed}"
        )
    return sig
