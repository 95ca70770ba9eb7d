"""What a REST handler receives and returns, and the operation registry."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from aiohttp import web

if TYPE_CHECKING:
    from .server import GitHubSimulator
    from .state import RepoState

DOCS = "https://docs.github.com/rest"


class ApiError(Exception):
    def __init__(
        self,
        status: int,
        message: str,
        errors: list[dict[str, Any]] | list[str] | None = None,
        headers: dict[str, str] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.message = message
        self.errors = errors
        self.headers = headers or {}

    def body(self) -> dict[str, Any]:
        out: dict[str, Any] = {"message": self.message, "documentation_url": DOCS}
        if self.errors is not None:
            out["errors"] = self.errors
        if self.status in (401, 403, 404, 409, 422) or self.status >= 500:
            out["status"] = str(self.status)
        return out


def not_found() -> ApiError:
    return ApiError(404, "Not Found")


def invalid(
    resource: str, field_name: str, code: str = "invalid", message: str | None = None
) -> ApiError:
    err: dict[str, Any] = {"resource": resource, "field": field_name, "code": code}
    if message:
        err["message"] = message
    return ApiError(422, "Validation Failed", [err])


@dataclass
class Reply:
    status: int = 200
    body: Any = None
    headers: dict[str, str] = field(default_factory=dict)
    raw: bool = False  # body is already complete (not completed from the schema)


@dataclass
class Ctx:
    sim: GitHubSimulator
    request: web.Request
    params: dict[str, str]
    body: Any
    actor: str | None
    installation_id: int | None

    @property
    def query(self) -> Any:
        return self.request.query

    def repo(self) -> RepoState:
        key = f"{self.params['owner']}/{self.params['repo']}".lower()
        repo = self.sim.repos.get(key)
        if repo is None:
            raise not_found()
        return repo

    def int_param(self, name: str) -> int:
        try:
            return int(self.params[name])
        except (KeyError, ValueError):
            raise not_found() from None

    def field(
        self,
        name: str,
        kind: type | tuple[type, ...] = str,
        *,
        required: bool = True,
        default: Any = None,
        resource: str = "Issue",
    ) -> Any:
        body = self.body if isinstance(self.body, dict) else {}
        if name not in body or body[name] is None:
            if required:
                raise invalid(resource, name, "missing_field", f"{name} is missing")
            return default
        value = body[name]
        if not isinstance(value, kind) or (kind is int and isinstance(value, bool)):
            raise invalid(resource, name, "invalid", f"{name} is not valid")
        return value

    @property
    def actor_login(self) -> str:
        return self.actor or self.sim.bot_login


Handler = Callable[[Ctx], Awaitable[Reply]]
HANDLERS: dict[str, Handler] = {}


def route(operation_id: str) -> Callable[[Handler], Handler]:
    def register(fn: Handler) -> Handler:
        HANDLERS[operation_id] = fn
        return fn

    return register


def paginate(ctx: Ctx, items: list[Any]) -> tuple[list[Any], dict[str, str]]:
    try:
        per_page = max(1, min(100, int(ctx.query.get("per_page", 30))))
        page = max(1, int(ctx.query.get("page", 1)))
    except ValueError:
        per_page, page = 30, 1
    start = (page - 1) * per_page
    chunk = items[start : start + per_page]
    headers: dict[str, str] = {}
    last = max(1, -(-len(items) // per_page))
    if last > 1:
        url = ctx.request.url
        links = []
        if page < last:
            links.append(f'<{url.update_query(page=page + 1, per_page=per_page)}>; rel="next"')
            links.append(f'<{url.update_query(page=last, per_page=per_page)}>; rel="last"')
        if page > 1:
            links.append(f'<{url.update_query(page=1, per_page=per_page)}>; rel="first"')
            links.append(f'<{url.update_query(page=page - 1, per_page=per_page)}>; rel="prev"')
        if links:
            headers["Link"] = ", ".join(links)
    return chunk, headers
