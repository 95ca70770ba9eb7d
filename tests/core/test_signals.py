"""The four signal-back payloads: what is accepted, and that every refusal names its field."""

from __future__ import annotations

from typing import Any

import pytest
from pydantic import ValidationError

from scaffold.errors import SignalError
from scaffold.roles import ALLOWED_SIGNALS, Role
from scaffold.signals import (
    SIGNAL_TYPES,
    Complete,
    NeedsRoleFollowup,
    NeedsUserInput,
    PartiallyComplete,
    parse_signal,
    signal_json_schema,
)

VALID: dict[str, dict[str, Any]] = {
    "complete": {"signal": "complete", "stepId": "TASK-1", "summary": "added login"},
    "partially-complete": {
        "signal": "partially-complete",
        "stepId": "TASK-1",
        "progress": "the model",
        "continuationPoint": "the view",
    },
    "needs-user-input": {
        "signal": "needs-user-input",
        "stepId": "TASK-1",
        "question": "Which database?",
        "context": "Both are configured.",
    },
    "needs-role-followup": {
        "signal": "needs-role-followup",
        "stepId": "TASK-1",
        "targetRole": "spiritmender",
        "reason": "lint errors",
        "context": "ruff reports 3 errors",
        "resume": False,
    },
}
MODELS = {
    "complete": Complete,
    "partially-complete": PartiallyComplete,
    "needs-user-input": NeedsUserInput,
    "needs-role-followup": NeedsRoleFollowup,
}
# A value of the wrong type for each field.
WRONG_TYPE: dict[str, Any] = {
    "stepId": 12,
    "summary": ["a"],
    "progress": 1.5,
    "continuationPoint": {"line": 3},
    "question": None,
    "context": 7,
    "targetRole": 3,
    "reason": True,
    "resume": [True],
}


def _fields(kind: str) -> list[str]:
    return [f for f in VALID[kind] if f != "signal"]


MISSING = [(k, f) for k in SIGNAL_TYPES for f in _fields(k)]


def test_cases_cover_every_kind_and_field() -> None:
    assert set(VALID) == set(SIGNAL_TYPES)
    for kind, model in MODELS.items():
        assert set(model.model_fields) == set(VALID[kind])
    assert {f for k in SIGNAL_TYPES for f in _fields(k)} == set(WRONG_TYPE)


@pytest.mark.parametrize("kind", SIGNAL_TYPES)
def test_every_kind_is_valid(kind: str) -> None:
    sig = parse_signal(dict(VALID[kind]))
    assert type(sig) is MODELS[kind]
    assert sig.model_dump() == VALID[kind]
    assert sig.signal == kind


def test_followup_target_is_a_role() -> None:
    sig = parse_signal(VALID["needs-role-followup"])
    assert isinstance(sig, NeedsRoleFollowup)
    assert sig.target is Role.SPIRITMENDER
    assert sig.resume is False


def test_whitespace_is_stripped_and_signals_are_frozen() -> None:
    sig = parse_signal({**VALID["complete"], "summary": "  added login \n"})
    assert isinstance(sig, Complete)
    assert sig.summary == "added login"
    with pytest.raises(ValidationError):
        sig.summary = "changed"  # type: ignore[misc]


@pytest.mark.parametrize(("kind", "field"), MISSING, ids=[f"{k}-{f}" for k, f in MISSING])
def test_missing_field_is_named(kind: str, field: str) -> None:
    data = {k: v for k, v in VALID[kind].items() if k != field}
    with pytest.raises(SignalError) as info:
        parse_signal(data)
    assert info.value.field == field
    assert "required" in info.value.reason.lower()
    assert str(info.value).startswith(f"{field}: ")


@pytest.mark.parametrize(("kind", "field"), MISSING, ids=[f"{k}-{f}" for k, f in MISSING])
def test_wrong_type_is_named(kind: str, field: str) -> None:
    with pytest.raises(SignalError) as info:
        parse_signal({**VALID[kind], field: WRONG_TYPE[field]})
    assert info.value.field == field


@pytest.mark.parametrize(
    ("kind", "field"),
    [(k, f) for k, f in MISSING if f not in ("resume", "targetRole")],
    ids=str,
)
def test_blank_text_is_refused(kind: str, field: str) -> None:
    with pytest.raises(SignalError) as info:
        parse_signal({**VALID[kind], field: "   "})
    assert info.value.field == field


def test_over_long_step_id_is_refused() -> None:
    with pytest.raises(SignalError) as info:
        parse_signal({**VALID["complete"], "stepId": "T" * 201})
    assert info.value.field == "stepId"


@pytest.mark.parametrize("kind", SIGNAL_TYPES)
def test_extra_field_is_named(kind: str) -> None:
    with pytest.raises(SignalError) as info:
        parse_signal({**VALID[kind], "confidence": 0.9})
    assert info.value.field == "confidence"
    assert info.value.reason == f"unknown field for a {kind!r} signal"


def test_field_of_another_kind_is_an_extra_field() -> None:
    with pytest.raises(SignalError) as info:
        parse_signal({**VALID["complete"], "resume": True})
    assert info.value.field == "resume"


@pytest.mark.parametrize("value", ["done", "COMPLETE", "", None, 3])
def test_unknown_signal_is_named(value: Any) -> None:
    with pytest.raises(SignalError) as info:
        parse_signal({**VALID["complete"], "signal": value})
    assert info.value.field == "signal"
    assert "complete, partially-complete, needs-user-input, needs-role-followup" in (
        info.value.reason
    )


def test_missing_signal_is_named() -> None:
    data = {k: v for k, v in VALID["complete"].items() if k != "signal"}
    with pytest.raises(SignalError) as info:
        parse_signal(data)
    assert info.value.field == "signal"


@pytest.mark.parametrize("data", [[VALID["complete"]], "complete", None, 1])
def test_a_signal_must_be_an_object(data: Any) -> None:
    with pytest.raises(SignalError) as info:
        parse_signal(data)
    assert info.value.field == ""
    assert "JSON object" in info.value.reason


@pytest.mark.parametrize("target", ["chaoswhisperer", "Codeweaver", "minion", ""])
def test_target_role_must_be_a_followup_role(target: str) -> None:
    with pytest.raises(SignalError) as info:
        parse_signal({**VALID["needs-role-followup"], "targetRole": target})
    assert info.value.field == "targetRole"


ROLE_KIND = [(r, k) for r in Role for k in SIGNAL_TYPES]


@pytest.mark.parametrize(("role", "kind"), ROLE_KIND, ids=[f"{r.value}-{k}" for r, k in ROLE_KIND])
def test_role_may_send_only_its_signals(role: Role, kind: str) -> None:
    if kind in ALLOWED_SIGNALS[role]:
        assert parse_signal(VALID[kind], role=role).signal == kind
        return
    with pytest.raises(SignalError) as info:
        parse_signal(VALID[kind], role=role)
    assert info.value.field == "signal"
    assert f"{role.display} may not signal {kind!r}" in info.value.reason


def test_allowed_signals_follow_seed_002() -> None:
    assert {r: sorted(s) for r, s in ALLOWED_SIGNALS.items()} == {
        Role.CHAOSWHISPERER: ["complete", "needs-user-input"],
        Role.PATHSEEKER: sorted(SIGNAL_TYPES),
        Role.CODEWEAVER: sorted(SIGNAL_TYPES),
        Role.SIEGEMASTER: ["complete", "needs-role-followup", "partially-complete"],
        Role.LAWBRINGER: ["complete", "needs-role-followup"],
        Role.SPIRITMENDER: sorted(SIGNAL_TYPES),
    }


def test_json_schema_names_the_four_signals() -> None:
    schema = signal_json_schema()
    assert schema["discriminator"]["propertyName"] == "signal"
    assert set(schema["discriminator"]["mapping"]) == set(SIGNAL_TYPES)
    assert len(schema["oneOf"]) == 4
