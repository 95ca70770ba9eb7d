"""Webhook deliveries as GitHub sends them: payloads built on the vendored examples, checked
against the vendored webhook JSON Schema, signed with the shared secret."""

from __future__ import annotations

import copy
import hashlib
import hmac
import json
import re
import uuid
from functools import cache, lru_cache
from pathlib import Path
from typing import Any

from jsonschema import Draft7Validator, FormatChecker  # type: ignore[import-untyped]

from .openapi import FIXTURES

EXAMPLES = FIXTURES / "webhook-examples"
SCHEMA_PATH = FIXTURES / "webhooks.schema.json"
DROP = object()  # an override value that removes the key from the template


class Exact:
    """An override taken as it is, not fitted into the example's shape: for objects with
    keys no example has (a review comment's ``in_reply_to_id``); the schema still checks it."""

    def __init__(self, value: Any) -> None:
        self.value = value


# Actions with no example of their own borrow another example of the same event.
_BORROW = {("workflow_run", "in_progress"): "requested", ("issues", "closed"): "reopened"}


class DeliverySchemaError(AssertionError):
    """A payload the simulator built does not match GitHub's webhook schema."""


@lru_cache(maxsize=1)
def _schema() -> dict[str, Any]:
    return json.loads(SCHEMA_PATH.read_text())  # type: ignore[no-any-return]


@cache
def validator(event: str, action: str | None) -> Draft7Validator:
    schema = _schema()
    name = f"{event}${action}" if action else f"{event}$event"
    if name not in schema["definitions"]:
        raise KeyError(f"no webhook schema definition {name}")
    sub = {"$ref": f"#/definitions/{name}", "definitions": schema["definitions"]}
    return Draft7Validator(sub, format_checker=FormatChecker())


def schema_errors(event: str, action: str | None, payload: dict[str, Any]) -> list[str]:
    errors = sorted(
        validator(event, action).iter_errors(payload), key=lambda e: list(e.absolute_path)
    )
    return [f"{'/'.join(map(str, e.absolute_path)) or '<root>'}: {e.message[:300]}" for e in errors]


def validate(event: str, action: str | None, payload: dict[str, Any]) -> None:
    errors = schema_errors(event, action, payload)
    if errors:
        raise DeliverySchemaError(
            f"{event}.{action} payload breaks the schema:\n" + "\n".join(errors[:20])
        )


def _example_files(event: str, action: str | None) -> list[Path]:
    stem = action or "_"
    return sorted(EXAMPLES.glob(f"{event}/{stem}.*.json"), key=lambda p: int(p.name.split(".")[-2]))


@cache
def _template_text(event: str, action: str | None) -> str:
    """The first example of this event/action that passes the schema, else the closest."""
    source_action = _BORROW.get((event, action or ""), action)
    files = _example_files(event, source_action)
    if not files:
        raise KeyError(f"no webhook example for {event}.{action}")
    ranked: list[tuple[int, str]] = []
    for path in files:
        payload = json.loads(path.read_text())
        if source_action != action:
            payload["action"] = action
        n_errors = len(schema_errors(event, action, payload))
        if n_errors == 0:
            return json.dumps(payload)
        ranked.append((n_errors, json.dumps(payload)))
    # None passes: the closest one (the builder's overrides must mend the rest).
    return min(ranked)[1]


_API = re.compile(r"https://api\.github\.com")
_UPLOADS = re.compile(r"https://uploads\.github\.com")
_WEB = re.compile(
    r"(?:https?|git)://(?:[a-z0-9-]+\.)*(?:github\.com|githubusercontent\.com|octocoders\.io)"
)
_SSH = re.compile(r"git@github\.com:")


def rewrite_urls(node: Any, api: str) -> Any:
    """Point every url of an example at the simulator."""
    if isinstance(node, dict):
        return {k: rewrite_urls(v, api) for k, v in node.items()}
    if isinstance(node, list):
        return [rewrite_urls(v, api) for v in node]
    if isinstance(node, str) and ("github" in node or "octocoders" in node):
        node = _API.sub(api, node)
        node = _UPLOADS.sub(f"{api}/_uploads", node)
        node = _SSH.sub(f"{api}/git/", node)
        return _WEB.sub(f"{api}/_web", node)
    return node


def template(event: str, action: str | None, api: str = "http://127.0.0.1") -> dict[str, Any]:
    payload = json.loads(_template_text(event, action))
    payload.pop("organization", None)
    return rewrite_urls(payload, api)  # type: ignore[no-any-return]


def fit(shape: Any, mine: Any) -> Any:
    """``mine`` in ``shape``'s form: the keys of the example, values from the simulator."""
    if isinstance(mine, Exact):
        return copy.deepcopy(mine.value)
    if isinstance(shape, dict) and isinstance(mine, dict):
        out = {}
        for key, value in shape.items():
            if key in mine:
                if mine[key] is DROP:
                    continue
                out[key] = fit(value, mine[key])
            else:
                out[key] = value
        for key, value in mine.items():
            if key not in shape and isinstance(value, Exact):
                out[key] = copy.deepcopy(value.value)  # a key the example lacks, on purpose
        return out
    if isinstance(shape, list) and isinstance(mine, list):
        if shape and isinstance(shape[0], dict):
            return [fit(shape[0], item) if isinstance(item, dict) else item for item in mine]
        return mine
    return mine


def build_delivery(
    event: str,
    action: str | None,
    overrides: dict[str, Any],
    *,
    api: str = "http://127.0.0.1",
    check: bool = True,
) -> dict[str, Any]:
    """A payload of ``event``/``action`` (action None for push, status…): the example, with
    ``overrides`` fitted into its shape, validated against the schema (raises when not)."""
    payload = template(event, action, api)
    for key, value in overrides.items():
        if value is DROP:
            payload.pop(key, None)
        elif key in payload:
            payload[key] = fit(payload[key], value)
        else:
            payload[key] = copy.deepcopy(value.value if isinstance(value, Exact) else value)
    if check:
        validate(event, action, payload)
    return payload


def sign(body: bytes, secret: str) -> str:
    return "sha256=" + hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def delivery_headers(
    event: str,
    body: bytes,
    secret: str,
    delivery_id: str | None = None,
    *,
    hook_id: int = 1,
    target_id: int = 4242,
) -> dict[str, str]:
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery_id or str(uuid.uuid4()),
        "X-GitHub-Hook-ID": str(hook_id),
        "X-GitHub-Hook-Installation-Target-ID": str(target_id),
        "X-GitHub-Hook-Installation-Target-Type": "integration",
        "X-Hub-Signature-256": sign(body, secret),
        "User-Agent": "GitHub-Hookshot/sim",
        "Content-Type": "application/json",
    }
