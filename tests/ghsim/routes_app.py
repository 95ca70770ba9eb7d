"""App, installation, token and rate-limit operations."""

from __future__ import annotations

import datetime as dt
import time

from . import objects as ob
from .context import ApiError, Ctx, Reply, not_found, paginate, route


def _installation_json(ctx: Ctx, inst_id: int) -> dict[str, object]:
    sim = ctx.sim
    inst = sim.installations.get(inst_id)
    if inst is None:
        raise not_found()
    return ob.installation_obj(sim.urls, inst, sim.users[inst.account], sim.app_id, sim.app_slug)


@route("apps/get-authenticated")
async def get_app(ctx: Ctx) -> Reply:
    obj = ctx.sim.app_json()
    obj["installations_count"] = len(ctx.sim.installations)
    return Reply(200, obj)


@route("apps/list-installations")
async def list_installations(ctx: Ctx) -> Reply:
    with ctx.sim.lock:
        items = [_installation_json(ctx, i) for i in sorted(ctx.sim.installations)]
    chunk, headers = paginate(ctx, items)
    return Reply(200, chunk, headers)


@route("apps/get-installation")
async def get_installation(ctx: Ctx) -> Reply:
    with ctx.sim.lock:
        return Reply(200, _installation_json(ctx, ctx.int_param("installation_id")))


@route("apps/create-installation-access-token")
async def create_token(ctx: Ctx) -> Reply:
    sim = ctx.sim
    inst_id = ctx.int_param("installation_id")
    with sim.lock:
        inst = sim.installations.get(inst_id)
        if inst is None:
            raise not_found()
        body = ctx.body if isinstance(ctx.body, dict) else {}
        wanted = body.get("repositories")
        if wanted is not None:
            known = {r.split("/", 1)[1] for r in inst.repos}
            if not isinstance(wanted, list) or any(w not in known for w in wanted):
                raise ApiError(
                    422,
                    "There is at least one repository that does not exist or is not accessible to the parent installation.",
                )
        token = sim.issue_token(inst_id)
        repos = [
            ob.repo_obj(sim.urls, sim.repo_state(r), sim.users[sim.repo_state(r).owner])
            for r in inst.repos
            if wanted is None or r.split("/", 1)[1] in wanted
        ]
    expires = dt.datetime.fromtimestamp(token.expires_at, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return Reply(
        201,
        {
            "token": token.token,
            "expires_at": expires,
            "permissions": token.permissions,
            "repository_selection": "selected",
            "repositories": repos,
        },
    )


@route("apps/list-repos-accessible-to-installation")
async def installation_repos(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        inst = sim.installations[ctx.installation_id or 0]
        repos = [
            ob.repo_obj(sim.urls, sim.repo_state(r), sim.users[sim.repo_state(r).owner])
            for r in inst.repos
        ]
    chunk, headers = paginate(ctx, repos)
    return Reply(
        200,
        {"total_count": len(repos), "repositories": chunk, "repository_selection": "selected"},
        headers,
    )


@route("apps/get-repo-installation")
async def repo_installation(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        inst = sim.installation_for(repo.full_name)
        if inst is None:
            raise not_found()
        return Reply(200, _installation_json(ctx, inst.id))


@route("rate-limit/get")
async def rate_limit(ctx: Ctx) -> Reply:
    sim = ctx.sim
    core = {
        "limit": sim.rate_limit,
        "remaining": max(0, sim.rate_limit - sim.rate_used),
        "reset": sim.rate_reset,
        "used": sim.rate_used,
    }
    other = {"limit": 5000, "remaining": 5000, "reset": int(time.time()) + 3600, "used": 0}
    resources = {
        "core": core,
        "search": dict(other),
        "graphql": dict(other),
        "integration_manifest": dict(other),
    }
    return Reply(200, {"resources": resources, "rate": core})
