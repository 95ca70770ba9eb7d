"""The OpenAPI slice: loading (once per process), operation lookup, request/response
validation, and completing response objects so they carry every required field."""

from __future__ import annotations

import copy
import datetime as dt
import json
import re
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import Any
from urllib.parse import quote

from openapi_core import Config, OpenAPI
from openapi_core.datatypes import RequestParameters
from werkzeug.datastructures import Headers, ImmutableMultiDict

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "github"
SPEC_PATH = FIXTURES / "github-app-subset.openapi.json"
SPEC_HOST = "https://api.github.com"


def _patch_nullable_enums(node: Any) -> None:
    """GitHub writes ``nullable: true`` beside an ``enum`` without null; make null legal."""
    if isinstance(node, dict):
        enum = node.get("enum")
        if node.get("nullable") is True and isinstance(enum, list) and None not in enum:
            enum.append(None)
        for value in node.values():
            _patch_nullable_enums(value)
    elif isinstance(node, list):
        for value in node:
            _patch_nullable_enums(value)


@lru_cache(maxsize=1)
def spec_dict() -> dict[str, Any]:
    raw = json.loads(SPEC_PATH.read_text())
    _patch_nullable_enums(raw)
    return raw  # type: ignore[no-any-return]


@lru_cache(maxsize=1)
def openapi() -> OpenAPI:
    return OpenAPI.from_dict(copy.deepcopy(spec_dict()), config=Config(spec_validator_cls=None))


@dataclass(frozen=True)
class Operation:
    method: str
    template: str
    operation_id: str
    regex: re.Pattern[str]
    params: tuple[str, ...]

    def match(self, path: str) -> dict[str, str] | None:
        found = self.regex.fullmatch(path)
        return None if found is None else found.groupdict()


@lru_cache(maxsize=1)
def operations() -> tuple[Operation, ...]:
    ops: list[Operation] = []
    for template, item in spec_dict()["paths"].items():
        names = tuple(re.findall(r"{(\w+)}", template))
        pattern = re.escape(template)
        for name in names:
            # `ref` in git/refs routes may hold slashes (heads/feature/x).
            part = f"(?P<{name}>.+)" if name in ("ref", "path") else f"(?P<{name}>[^/]+)"
            pattern = pattern.replace(re.escape(f"{{{name}}}"), part)
        for method, op in item.items():
            if method in ("get", "post", "put", "patch", "delete"):
                ops.append(
                    Operation(
                        method.upper(), template, op["operationId"], re.compile(pattern), names
                    )
                )
    # Most specific (fewest parameters, longest literal) first.
    ops.sort(key=lambda o: (len(o.params), -len(o.template)))
    return tuple(ops)


def find_operation(method: str, path: str) -> tuple[Operation, dict[str, str]] | None:
    for op in operations():
        if op.method != method.upper():
            continue
        params = op.match(path)
        if params is not None:
            return op, params
    return None


def spec_path(op: Operation, params: dict[str, str]) -> str:
    """The path as the validator can match it: a parameter's own slashes (git refs,
    content paths) percent-encoded, since a path template segment never spans a slash."""
    path = op.template
    for name, value in params.items():
        path = path.replace(f"{{{name}}}", quote(value, safe=""))
    return path


def operation_spec(op: Operation) -> dict[str, Any]:
    return spec_dict()["paths"][op.template][op.method.lower()]  # type: ignore[no-any-return]


def documented_statuses(op: Operation) -> set[str]:
    return set(operation_spec(op).get("responses", {}))


@dataclass
class SpecRequest:
    method: str
    path: str
    query: list[tuple[str, str]] = field(default_factory=list)
    headers: dict[str, str] = field(default_factory=dict)
    body: bytes | None = None
    content_type: str = "application/json"
    host_url: str = SPEC_HOST

    def __post_init__(self) -> None:
        self.method = self.method.lower()
        self.parameters = RequestParameters(
            query=ImmutableMultiDict(self.query), header=Headers(list(self.headers.items()))
        )


@dataclass
class SpecResponse:
    status_code: int
    data: bytes | None
    headers: dict[str, str] = field(default_factory=dict)
    content_type: str = "application/json"

    def __post_init__(self) -> None:
        self.headers = Headers(list(self.headers.items()))  # type: ignore[assignment]


def _describe(exc: BaseException) -> str:
    parts = [f"{type(exc).__name__}: {str(exc)[:300]}"]
    for inner in getattr(exc, "schema_errors", None) or []:
        parts.append(f"  - {'/'.join(map(str, inner.absolute_path))}: {inner.message}")
    cause = exc.__cause__ or exc.__context__
    if cause is not None and cause is not exc:
        for inner in getattr(cause, "schema_errors", None) or []:
            parts.append(f"  - {'/'.join(map(str, inner.absolute_path))}: {inner.message}")
    return "\n".join(parts)


def request_errors(request: SpecRequest) -> list[str]:
    return [_describe(e) for e in openapi().iter_request_errors(request)]


def response_errors(request: SpecRequest, response: SpecResponse) -> list[str]:
    return [_describe(e) for e in openapi().iter_response_errors(request, response)]


# ---------------------------------------------------------------- completing objects


def resolve(schema: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        node: Any = spec_dict()
        for part in schema["$ref"].lstrip("#/").split("/"):
            node = node[part]
        schema = node
    return schema


def response_schema(op: Operation, status: int) -> dict[str, Any] | None:
    response = operation_spec(op).get("responses", {}).get(str(status))
    if response is None:
        return None
    content = resolve(response).get("content", {})
    media = content.get("application/json")
    return None if media is None else media.get("schema")


def _now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _default(schema: dict[str, Any], name: str, base_url: str) -> Any:
    schema = resolve(schema)
    if schema.get("nullable"):
        return None
    for key in ("allOf", "anyOf", "oneOf"):
        if key in schema:
            return complete(schema[key][0], None, base_url, name)
    if "enum" in schema:
        return schema["enum"][0]
    kind = schema.get("type")
    if kind == "object" or "properties" in schema:
        return complete(schema, {}, base_url, name)
    if kind == "array":
        return []
    if kind == "boolean":
        return False
    if kind in ("integer", "number"):
        return int(schema.get("minimum", 0))
    fmt = schema.get("format")
    if fmt == "date-time":
        return _now()
    if fmt == "date":
        return _now()[:10]
    if fmt == "email":
        return "noreply@sim.invalid"
    if fmt == "uri" or name == "url" or name.endswith("_url"):
        return f"{base_url}/_sim/{name}"
    if fmt == "uuid":
        return "00000000-0000-4000-8000-000000000000"
    return ""


def complete(schema: dict[str, Any], value: Any, base_url: str, name: str = "") -> Any:
    """``value`` with every required property the schema asks for filled in."""
    schema = resolve(schema)
    if value is None:
        return _default(schema, name, base_url) if name == "" else None
    if "allOf" in schema:
        for sub in schema["allOf"]:
            value = complete(sub, value, base_url, name)
        return value
    if isinstance(value, dict) and ("anyOf" in schema or "oneOf" in schema):
        subs = [resolve(s) for s in schema.get("anyOf", schema.get("oneOf", []))]
        objects = [s for s in subs if s.get("type") == "object" or "properties" in s]
        return complete(objects[0], value, base_url, name) if objects else value
    if isinstance(value, dict) and (schema.get("type") == "object" or "properties" in schema):
        out = dict(value)
        props = schema.get("properties", {})
        for key in schema.get("required", []):
            if key not in out:
                out[key] = _default(props.get(key, {}), key, base_url)
        for key, sub in props.items():
            if key in out and out[key] is not None:
                out[key] = complete(sub, out[key], base_url, key)
        return out
    if isinstance(value, list) and schema.get("type") == "array" and "items" in schema:
        return [complete(schema["items"], item, base_url, name) for item in value]
    return value


def schema_errors_for(component: str, value: Any) -> list[str]:
    """Errors of ``value`` against one component schema of the slice."""
    from openapi_schema_validator import OAS30Validator

    schema = {
        **spec_dict()["components"]["schemas"][component],
        "components": spec_dict()["components"],
    }
    validator = OAS30Validator(schema)
    return [
        f"{'/'.join(map(str, e.absolute_path))}: {e.message[:300]}"
        for e in validator.iter_errors(value)
    ]
