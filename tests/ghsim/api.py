"""The aiohttp application: faults, auth, OpenAPI validation both ways, dispatch by operation."""

from __future__ import annotations

import asyncio
import json
import logging
import secrets
import time
from typing import TYPE_CHECKING, Any

from aiohttp import web

from . import openapi as oa
from . import routes_actions, routes_app, routes_checks, routes_issues, routes_pulls, routes_repos
from .context import HANDLERS, ApiError, Ctx, Reply
from .githttp import handle_git

if TYPE_CHECKING:
    from .server import GitHubSimulator

log = logging.getLogger("ghsim.api")
_ROUTE_MODULES = (
    routes_actions,
    routes_app,
    routes_checks,
    routes_issues,
    routes_pulls,
    routes_repos,
)
JWT_OPERATIONS = {
    "apps/get-authenticated",
    "apps/list-installations",
    "apps/get-installation",
    "apps/create-installation-access-token",
    "apps/get-repo-installation",
}
OPEN_OPERATIONS = {"rate-limit/get"}


def make_app(sim: GitHubSimulator) -> web.Application:
    async def git_route(request: web.Request) -> web.StreamResponse:
        return await handle_git(sim, request)

    async def artifact_route(request: web.Request) -> web.StreamResponse:
        return await artifact_zip(sim, request)

    async def job_log_route(request: web.Request) -> web.StreamResponse:
        return await job_log(sim, request)

    async def api_route(request: web.Request) -> web.StreamResponse:
        return await handle_api(sim, request)

    app = web.Application(client_max_size=64 * 1024 * 1024)
    app.router.add_route("*", "/git/{tail:.*}", git_route)
    app.router.add_get("/_artifacts/{artifact_id}.zip", artifact_route)
    app.router.add_get("/_logs/jobs/{job_id}", job_log_route)
    app.router.add_get("/_web/{tail:.*}", web_page)
    app.router.add_route("*", "/{tail:.*}", api_route)
    return app


async def web_page(request: web.Request) -> web.Response:
    return web.Response(
        text=f"<html><body>simulated page {request.path}</body></html>", content_type="text/html"
    )


async def artifact_zip(sim: GitHubSimulator, request: web.Request) -> web.Response:
    wanted = request.match_info["artifact_id"]
    with sim.lock:
        for repo in sim.repos.values():
            for run in repo.workflow_runs.values():
                for art in run.artifacts:
                    if str(art.id) == wanted:
                        return web.Response(body=art.data, content_type="application/zip")
    return web.Response(status=404, text="Not Found")


async def job_log(sim: GitHubSimulator, request: web.Request) -> web.Response:
    """An Actions job's log, at the signed URL its log download redirected to (no token
    needed, as GitHub's; a wrong signature is refused as blob storage refuses it)."""
    wanted = request.match_info["job_id"]
    signature = request.query.get("sig", "")
    with sim.lock:
        for repo in sim.repos.values():
            for run in repo.workflow_runs.values():
                if str(run.job_id) == wanted:
                    if not run.log_key or not secrets.compare_digest(signature, run.log_key):
                        return web.Response(status=403, text="AuthenticationFailed")
                    return web.Response(text=run.log, content_type="text/plain")
    return web.Response(status=404, text="Not Found")


def rate_headers(sim: GitHubSimulator) -> dict[str, str]:
    with sim.lock:
        sim.rate_used += 1
        remaining = max(0, sim.rate_limit - sim.rate_used)
    return {
        "X-RateLimit-Limit": str(sim.rate_limit),
        "X-RateLimit-Remaining": str(remaining),
        "X-RateLimit-Reset": str(sim.rate_reset),
        "X-RateLimit-Used": str(sim.rate_used),
        "X-RateLimit-Resource": "core",
        "X-GitHub-Media-Type": "github.v3; format=json",
    }


def json_response(status: int, body: Any, headers: dict[str, str]) -> web.Response:
    if status in (204, 302) or body is None:
        return web.Response(status=status, headers=headers)
    return web.Response(
        status=status,
        body=json.dumps(body).encode(),
        headers={**headers, "Content-Type": "application/json; charset=utf-8"},
    )


def authenticate(
    sim: GitHubSimulator, request: web.Request, operation_id: str
) -> tuple[str | None, int | None]:
    """(actor login, installation id); raises 401 when the credentials do not fit the call."""
    header = request.headers.get("Authorization", "")
    scheme, _, credential = header.partition(" ")
    scheme = scheme.lower()
    credential = credential.strip()
    if operation_id in JWT_OPERATIONS:
        if scheme != "bearer" or not sim.verify_jwt(credential):
            raise ApiError(
                401,
                "A JSON web token could not be decoded"
                if credential
                else "Requires authentication",
            )
        return None, None
    if operation_id in OPEN_OPERATIONS and not credential:
        return None, None
    if scheme not in ("token", "bearer") or not credential:
        raise ApiError(401, "Requires authentication")
    token = sim.live_token(credential)
    if token is None:
        raise ApiError(401, "Bad credentials")
    if token.read_only and request.method not in ("GET", "HEAD"):
        raise ApiError(403, "Resource not accessible by integration")
    return sim.bot_login, token.installation_id


def check_repo_access(
    sim: GitHubSimulator, params: dict[str, str], installation_id: int | None
) -> None:
    if "owner" not in params or "repo" not in params or installation_id is None:
        return
    inst = sim.installations.get(installation_id)
    full = f"{params['owner']}/{params['repo']}".lower()
    if inst is None or full not in {r.lower() for r in inst.repos}:
        raise ApiError(404, "Not Found")


async def handle_api(sim: GitHubSimulator, request: web.Request) -> web.StreamResponse:
    method, path = request.method, request.path
    if sim.latency_s:
        await asyncio.sleep(sim.latency_s)
    fault = sim.take_fault(method, path)
    if fault is not None and fault.delay_s:
        await asyncio.sleep(fault.delay_s)
    if fault is not None and fault.status:  # status 0: only slow, then answered for real
        body = fault.body if fault.body is not None else {"message": f"injected {fault.status}"}
        if isinstance(body, (dict, list)):
            return json_response(fault.status, body, dict(fault.headers))
        return web.Response(status=fault.status, text=str(body), headers=fault.headers)

    found = oa.find_operation(method, path)
    if found is None:
        sim.violation(f"{method} {path}: no such operation in the OpenAPI slice")
        err = ApiError(404, "Not Found")
        return json_response(404, err.body(), rate_headers(sim))
    op, params = found
    raw = await request.read()
    spec_request = oa.SpecRequest(
        method,
        oa.spec_path(op, params),
        list(request.query.items()),
        dict(request.headers),
        raw or None,
        request.headers.get("Content-Type", "application/json").lower(),
    )
    for error in await asyncio.to_thread(oa.request_errors, spec_request):
        sim.violation(f"request {method} {path} ({op.operation_id}): {error}")

    headers = rate_headers(sim)
    try:
        parsed: Any = None
        if raw:
            try:
                parsed = json.loads(raw)
            except ValueError:
                raise ApiError(400, "Problems parsing JSON") from None
        actor, installation_id = authenticate(sim, request, op.operation_id)
        check_repo_access(sim, params, installation_id)
        handler = HANDLERS.get(op.operation_id)
        if handler is None:
            raise ApiError(501, f"{op.operation_id} is not simulated")
        reply = await handler(Ctx(sim, request, params, parsed, actor, installation_id))
    except ApiError as exc:
        reply = Reply(exc.status, exc.body(), exc.headers, raw=True)
    except Exception as exc:  # a simulator bug: fail the test through the violations list
        log.exception("simulator error in %s", op.operation_id)
        sim.violation(f"{method} {path} ({op.operation_id}) crashed: {type(exc).__name__}: {exc}")
        reply = Reply(500, {"message": f"simulator error: {type(exc).__name__}"}, raw=True)
    headers.update(reply.headers)
    payload = reply.body
    schema = oa.response_schema(op, reply.status)
    if schema is not None and payload is not None and not reply.raw:
        payload = oa.complete(schema, payload, sim.url)
    if sim.response_hook is not None:
        payload = sim.response_hook(op.operation_id, reply.status, payload)
    response = json_response(reply.status, payload, headers)
    sim.requests.append((method, path, reply.status))
    await asyncio.to_thread(check_response, sim, op, spec_request, reply.status, response, payload)
    if sim.answer_latency_s:
        await asyncio.sleep(sim.answer_latency_s)
    return response


def check_response(
    sim: GitHubSimulator,
    op: oa.Operation,
    spec_request: oa.SpecRequest,
    status: int,
    response: web.Response,
    payload: Any,
) -> None:
    started = time.monotonic()
    label = f"response {status} to {spec_request.method.upper()} {spec_request.path} ({op.operation_id})"
    if str(status) not in oa.documented_statuses(op):
        # Undocumented error statuses (401, 403, 429…) must still carry GitHub's error body.
        if status >= 400 and not (isinstance(payload, dict) and "message" in payload):
            sim.violation(f"{label}: error without a message body")
        elif status < 400:
            sim.violation(f"{label}: status not documented for this operation")
        return
    if op.operation_id == "repos/get-content" and isinstance(payload, list):
        # The spec's discriminator (on `type`) cannot select the array form, so a
        # directory listing is checked against `content-directory` itself.
        for error in oa.schema_errors_for("content-directory", payload):
            sim.violation(f"{label}: {error}")
        return
    data = response.body if isinstance(response.body, bytes) else None
    spec_response = oa.SpecResponse(
        status,
        data,
        dict(response.headers.items()),
        response.headers.get("Content-Type", "application/json").lower()
        if data
        else "application/json",
    )
    for error in oa.response_errors(spec_request, spec_response):
        sim.violation(f"{label}: {error}")
    log.debug("validated %s in %.3fs", label, time.monotonic() - started)


__all__ = ["_ROUTE_MODULES", "make_app"]
