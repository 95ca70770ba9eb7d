"""Issues, comments, labels and reactions."""

from __future__ import annotations

from typing import Any

from . import events
from . import objects as ob
from .context import ApiError, Ctx, Reply, invalid, not_found, paginate, route
from .state import Comment, Issue, Reaction, RepoState, now_iso

REACTIONS = ("+1", "-1", "laugh", "confused", "heart", "hooray", "rocket", "eyes")


def _issue(ctx: Ctx, repo: RepoState) -> Issue:
    issue = repo.issues.get(ctx.int_param("issue_number"))
    if issue is None:
        raise not_found()
    return issue


def _issue_json(ctx: Ctx, repo: RepoState, issue: Issue) -> dict[str, Any]:
    return ob.issue_obj(ctx.sim.urls, repo, issue, ctx.sim.users, ctx.sim.app_json())


def _comment(ctx: Ctx, repo: RepoState) -> Comment:
    comment = repo.comments.get(ctx.int_param("comment_id"))
    if comment is None:
        raise not_found()
    return comment


@route("issues/get")
async def get_issue(ctx: Ctx) -> Reply:
    with ctx.sim.lock:
        repo = ctx.repo()
        return Reply(200, _issue_json(ctx, repo, _issue(ctx, repo)))


def _set_labels(ctx: Ctx, repo: RepoState, issue: Issue, names: list[str]) -> None:
    sim = ctx.sim
    for name in names:
        sim.ensure_label(repo, name)
    removed = [n for n in issue.labels if n not in names]
    added = [n for n in names if n not in issue.labels]
    for name in removed:
        issue.labels.remove(name)
        sim._labels_event(repo, issue, "unlabeled", name, ctx.actor_login)
    for name in added:
        issue.labels.append(name)
        sim._labels_event(repo, issue, "labeled", name, ctx.actor_login)
    if removed or added:
        issue.updated_at = now_iso()


def _label_names(value: Any) -> list[str]:
    if not isinstance(value, list):
        raise invalid("Label", "labels")
    names: list[str] = []
    for item in value:
        name = item.get("name") if isinstance(item, dict) else item
        if not isinstance(name, str) or not name.strip():
            raise invalid("Label", "name")
        if name not in names:
            names.append(name)
    return names


@route("issues/update")
async def update_issue(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        issue = _issue(ctx, repo)
        body = ctx.body if isinstance(ctx.body, dict) else {}
        changes: dict[str, Any] = {}
        if "title" in body:
            title = ctx.field("title", str)
            if title != issue.title:
                changes["title"] = {"from": issue.title}
                issue.title = title
        if "body" in body:
            text = ctx.field("body", str, required=False)
            if text != issue.body:
                changes["body"] = {"from": issue.body or ""}
                issue.body = text
        if changes:
            issue.updated_at = now_iso()
            if not issue.is_pull:
                payload = events.base(sim, repo, ctx.actor_login)
                payload.update(
                    action="edited", issue=_issue_json(ctx, repo, issue), changes=changes
                )
                sim.emit("issues", "edited", payload)
        if "labels" in body:
            _set_labels(ctx, repo, issue, _label_names(body["labels"]))
        state = body.get("state")
        if state is not None:
            if state not in ("open", "closed"):
                raise invalid("Issue", "state")
            if state != issue.state:
                issue.state = state
                issue.updated_at = now_iso()
                if state == "closed":
                    issue.closed_at = issue.updated_at
                    issue.closed_by = ctx.actor_login
                    issue.state_reason = body.get("state_reason") or "completed"
                else:
                    issue.closed_at = None
                    issue.state_reason = "reopened"
                if issue.is_pull:
                    events.pull_request(
                        sim,
                        repo,
                        repo.pulls[issue.number],
                        (state == "closed" and "closed") or "reopened",
                        ctx.actor_login,
                    )
                else:
                    events.issues(
                        sim,
                        repo,
                        issue.number,
                        "closed" if state == "closed" else "reopened",
                        ctx.actor_login,
                    )
        return Reply(200, _issue_json(ctx, repo, issue))


@route("issues/list-comments")
async def list_comments(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        issue = _issue(ctx, repo)
        items = [
            ob.comment_obj(sim.urls, repo, c, sim.users, sim.app_json())
            for c in sorted(repo.comments.values(), key=lambda c: c.id)
            if c.issue_number == issue.number
        ]
    chunk, headers = paginate(ctx, items)
    return Reply(200, chunk, headers)


@route("issues/create-comment")
async def create_comment(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        issue = _issue(ctx, repo)
        text = ctx.field("body", str, resource="IssueComment")
        if len(text) > 65536:
            raise invalid(
                "IssueComment", "body", "custom", "Body is too long (maximum is 65536 characters)"
            )
        comment = Comment(sim.ids.next(), issue.number, text, ctx.actor_login)
        repo.comments[comment.id] = comment
        issue.updated_at = now_iso()
        events.issue_comment(sim, repo, comment.id, "created", ctx.actor_login)
        obj = ob.comment_obj(sim.urls, repo, comment, sim.users, sim.app_json())
    return Reply(201, obj, {"Location": obj["url"]})


@route("issues/get-comment")
async def get_comment(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        return Reply(
            200, ob.comment_obj(sim.urls, repo, _comment(ctx, repo), sim.users, sim.app_json())
        )


@route("issues/update-comment")
async def update_comment(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        comment = _comment(ctx, repo)
        text = ctx.field("body", str, resource="IssueComment")
        old = comment.body
        comment.body = text
        comment.updated_at = now_iso()
        if old != text:
            payload = events.base(sim, repo, ctx.actor_login)
            payload.update(
                action="edited",
                issue=_issue_json(ctx, repo, repo.issues[comment.issue_number]),
                comment=ob.comment_obj(
                    sim.urls, repo, comment, sim.users, sim.app_json(webhook=True)
                ),
                changes={"body": {"from": old}},
            )
            sim.emit("issue_comment", "edited", payload)
        return Reply(200, ob.comment_obj(sim.urls, repo, comment, sim.users, sim.app_json()))


def _react(ctx: Ctx, repo: RepoState, subject: tuple[str, int]) -> Reply:
    sim = ctx.sim
    content = ctx.field("content", str, resource="Reaction")
    if content not in REACTIONS:
        raise invalid("Reaction", "content")
    for reaction in repo.reactions:
        if (
            reaction.subject == subject
            and reaction.user == ctx.actor_login
            and reaction.content == content
        ):
            return Reply(200, ob.reaction_obj(sim.urls, reaction, sim.users))
    reaction = Reaction(sim.ids.next(), content, ctx.actor_login, subject)
    repo.reactions.append(reaction)
    return Reply(201, ob.reaction_obj(sim.urls, reaction, sim.users))


@route("reactions/create-for-issue")
async def react_issue(ctx: Ctx) -> Reply:
    with ctx.sim.lock:
        repo = ctx.repo()
        return _react(ctx, repo, ("issue", _issue(ctx, repo).number))


@route("reactions/create-for-issue-comment")
async def react_comment(ctx: Ctx) -> Reply:
    with ctx.sim.lock:
        repo = ctx.repo()
        return _react(ctx, repo, ("comment", _comment(ctx, repo).id))


@route("issues/list-labels-on-issue")
async def issue_labels(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        issue = _issue(ctx, repo)
        items = [ob.label_obj(sim.urls, repo, repo.labels[n]) for n in issue.labels]
    chunk, headers = paginate(ctx, items)
    return Reply(200, chunk, headers)


@route("issues/add-labels")
async def add_labels(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        issue = _issue(ctx, repo)
        body = ctx.body
        if isinstance(body, dict):
            body = body.get("labels")
        if isinstance(body, str):
            body = [body]
        names = _label_names(body)
        _set_labels(ctx, repo, issue, issue.labels + [n for n in names if n not in issue.labels])
        return Reply(200, [ob.label_obj(sim.urls, repo, repo.labels[n]) for n in issue.labels])


@route("issues/remove-label")
async def remove_label(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        issue = _issue(ctx, repo)
        name = ctx.params["name"]
        if name not in issue.labels:
            raise ApiError(404, "Label does not exist")
        _set_labels(ctx, repo, issue, [n for n in issue.labels if n != name])
        return Reply(200, [ob.label_obj(sim.urls, repo, repo.labels[n]) for n in issue.labels])


@route("issues/list-labels-for-repo")
async def repo_labels(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        items = [
            ob.label_obj(sim.urls, repo, lab)
            for lab in sorted(repo.labels.values(), key=lambda x: x.id)
        ]
    chunk, headers = paginate(ctx, items)
    return Reply(200, chunk, headers)


@route("issues/create-label")
async def create_label(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        name = ctx.field("name", str, resource="Label")
        color = (
            ctx.field("color", str, required=False, default="ededed", resource="Label")
        ).lstrip("#")
        if len(color) != 6 or any(c not in "0123456789abcdefABCDEF" for c in color):
            raise invalid("Label", "color")
        if name in repo.labels:
            raise invalid("Label", "name", "already_exists")
        label = sim.ensure_label(
            repo,
            name,
            color.lower(),
            ctx.field("description", str, required=False, resource="Label"),
        )
        obj = ob.label_obj(sim.urls, repo, label)
    return Reply(201, obj, {"Location": obj["url"]})
