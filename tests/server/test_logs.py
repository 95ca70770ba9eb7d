"""JSON log lines and the redaction of secrets."""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterator

import pytest

from scaffold.sanitize import MASK, redact
from scaffold.server.logs import configure_json_logging

PEM = (
    "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo\n"
    "4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onLRnrq0\n-----END RSA PRIVATE KEY-----"
)
GHS = "ghs_16C7e42F292c6912E7710c838347Ae178B4a"
GHP = "ghp_aBcDeFgHiJkLmNoPqRsTuVwXyZ0123456789"
PAT = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyz0123456789ABCD"
JWT = "eyJhbGciOiJSUzI1NiJ9.eyJpc3MiOiIxMjM0NTYiLCJleHAiOjF9.c2lnbmF0dXJlLXZhbHVl"


@pytest.mark.parametrize(
    ("text", "secret_part"),
    [
        (f"token is {GHS} ok", GHS),
        (f"push with {GHP}", GHP),
        (f"pat={PAT}", PAT),
        (f"key:\n{PEM}\nafter", "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo"),
        ("-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0BAQEFAASC\n(cut)", "MIIEvQIBADANBg"),
        ("Authorization: Bearer abc.def-ghi_jkl~123", "abc.def-ghi_jkl~123"),
        ("Authorization: bearer abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz"),
        ("Authorization: token 0123456789abcdef0123", "0123456789abcdef0123"),
        (f"jwt {JWT}", JWT),
        ("hook secret is my-webhook-secret!", "my-webhook-secret!"),
    ],
)
def test_redact(text: str, secret_part: str) -> None:
    out = redact(text, ["my-webhook-secret!"])
    assert secret_part not in out
    assert MASK in out


def test_redact_keeps_ordinary_text() -> None:
    text = "handled delivery 72d3162e for issues.labeled in 3 ms; token refreshed"
    assert redact(text, ["abc"]) == text  # a 3-character secret is too short to mask
    assert redact("Bearer abc.def-ghi9", ()) == f"Bearer {MASK}"
    assert redact("token authentication failed", ()) == "token authentication failed"
    assert redact("PEM ends\n-----END RSA PRIVATE KEY-----\nnext", ()).endswith("next")


@pytest.fixture
def log_lines() -> Iterator[tuple[logging.Logger, io.StringIO]]:
    stream = io.StringIO()
    root = logging.getLogger()
    old_level = root.level
    handler = configure_json_logging(logging.INFO, extra_secrets=["s3cr3t-hook"], stream=stream)
    try:
        yield logging.getLogger("scaffold.test"), stream
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)


def test_json_lines_with_extras_and_redaction(log_lines) -> None:
    log, stream = log_lines
    log.info("handled %s", "d-1", extra={"delivery": "d-1", "event": "issues", "ms": 2.5})
    log.warning("leaked %s", GHS, extra={"header": f"Bearer {GHS}", "why": "s3cr3t-hook"})
    try:
        raise RuntimeError(f"failed with {GHP} and s3cr3t-hook")
    except RuntimeError:
        log.exception("boom", extra={"delivery": "d-2"})
    log.debug("not shown")
    lines = stream.getvalue().splitlines()
    assert len(lines) == 3
    first, second, third = (json.loads(line) for line in lines)
    assert first["msg"] == "handled d-1"
    assert (first["level"], first["delivery"], first["event"], first["ms"]) == (
        "info",
        "d-1",
        "issues",
        2.5,
    )
    assert first["ts"].endswith("Z")
    assert first["logger"] == "scaffold.test"
    assert second["level"] == "warning"
    assert third["delivery"] == "d-2"
    assert "RuntimeError" in third["exc"]
    text = stream.getvalue()
    for secret in (GHS, GHP, "s3cr3t-hook"):
        assert secret not in text
