"""Pull requests: create/list/get/update, files, reviews, merge, update-branch."""

from __future__ import annotations

from . import events
from . import objects as ob
from .context import ApiError, Ctx, Reply, invalid, not_found, paginate, route
from .gitrepo import valid_branch
from .merging import merge_commit, mergeability
from .reviews import AnchorError
from .state import Pull, RepoState, Review, ReviewComment, now_iso


def _pull(ctx: Ctx, repo: RepoState) -> Pull:
    pr = repo.pulls.get(ctx.int_param("pull_number"))
    if pr is None:
        raise not_found()
    return pr


def _head_of(ctx: Ctx, repo: RepoState, head: str) -> tuple[RepoState, str] | None:
    """``[owner:]branch`` as the repository it lives in (this one, or the owner's fork of
    it) and the branch; None when the owner has no such repository."""
    if ":" not in head:
        return repo, head
    owner, _, branch = head.partition(":")
    if owner.lower() == repo.owner.lower():
        return repo, branch
    fork = next((f for f in ctx.sim.forks_of(repo) if f.owner.lower() == owner.lower()), None)
    return (fork, branch) if fork is not None else None


@route("pulls/list")
async def list_pulls(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        state = ctx.query.get("state", "open")
        head = ctx.query.get("head")
        base = ctx.query.get("base")
        wanted = _head_of(ctx, repo, head) if head is not None else None
        pulls = sorted(repo.pulls.values(), key=lambda p: -p.number)
        items = [
            sim.pull_json(repo, p)
            for p in pulls
            if (state == "all" or p.issue.state == state)
            and (
                head is None
                or (
                    wanted is not None
                    and p.head == wanted[1]
                    and sim.head_repo_of(repo, p) is wanted[0]
                )
            )
            and (base is None or p.base == base)
        ]
    chunk, headers = paginate(ctx, items)
    return Reply(200, chunk, headers)


@route("pulls/create")
async def create_pull(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        title = ctx.field("title", str, required=False, resource="PullRequest")
        found = _head_of(ctx, repo, ctx.field("head", str, resource="PullRequest"))
        if found is None:
            raise invalid("PullRequest", "head")
        head_repo, head = found
        base = ctx.field("base", str, resource="PullRequest")
        body = ctx.field("body", str, required=False, resource="PullRequest")
        draft = bool(
            ctx.field("draft", bool, required=False, default=False, resource="PullRequest")
        )
        if (
            title is None
            and ctx.field("issue", int, required=False, resource="PullRequest") is None
        ):
            raise invalid("PullRequest", "title", "missing_field")
        try:
            pr = sim.new_pull(
                repo,
                head_repo,
                head,
                base,
                title or head,
                body,
                ctx.actor_login,
                draft=draft,
                maintainer_can_modify=bool(
                    ctx.field(
                        "maintainer_can_modify",
                        bool,
                        required=False,
                        default=False,
                        resource="PullRequest",
                    )
                ),
            )
        except ValueError as exc:
            field_name = "base" if str(exc) == "base" else "head"
            message = None if str(exc) in ("head", "base") else str(exc)
            code = "custom" if message else "invalid"
            raise invalid("PullRequest", field_name, code, message) from None
        obj = sim.pull_json(repo, pr)
    return Reply(201, obj, {"Location": obj["url"]})


@route("pulls/get")
async def get_pull(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        return Reply(200, sim.pull_json(repo, _pull(ctx, repo)))


@route("pulls/update")
async def update_pull(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        pr = _pull(ctx, repo)
        body = ctx.body if isinstance(ctx.body, dict) else {}
        if "title" in body:
            pr.issue.title = ctx.field("title", str, resource="PullRequest")
        if "body" in body:
            pr.issue.body = ctx.field("body", str, required=False, resource="PullRequest")
        if "base" in body:
            base = ctx.field("base", str, resource="PullRequest")
            sha = sim.git_of(repo).branch_sha(base) if valid_branch(base) else None
            if sha is None:
                raise invalid("PullRequest", "base")
            pr.base, pr.base_sha = base, sha
        pr.issue.updated_at = now_iso()
        state = body.get("state")
        if state is not None:
            if state not in ("open", "closed"):
                raise invalid("PullRequest", "state")
            if state == "closed" and pr.issue.state == "open":
                sim._close_pull(repo, pr, ctx.actor_login)
            elif state == "open" and pr.issue.state == "closed":
                if pr.merged:
                    raise invalid(
                        "PullRequest", "state", "custom", "Cannot reopen a merged pull request"
                    )
                pr.issue.state = "open"
                pr.issue.closed_at = pr.issue.closed_by = None
                events.pull_request(sim, repo, pr, "reopened", ctx.actor_login)
        return Reply(200, sim.pull_json(repo, pr))


@route("pulls/list-files")
async def list_files(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        pr = _pull(ctx, repo)
        git = sim.git_of(repo)
        urls = sim.urls
        files = [
            {
                **f,
                "blob_url": f"{urls.web}/{repo.full_name}/blob/{pr.head_sha}/{f['filename']}",
                "raw_url": f"{urls.web}/{repo.full_name}/raw/{pr.head_sha}/{f['filename']}",
                "contents_url": f"{urls.repo(repo.full_name)}/contents/{f['filename']}?ref={pr.head_sha}",
            }
            for f in git.changed_files(pr.base_sha, pr.head_sha)
        ]
    chunk, headers = paginate(ctx, files)
    return Reply(200, chunk, headers)


@route("pulls/check-if-merged")
async def check_merged(ctx: Ctx) -> Reply:
    with ctx.sim.lock:
        repo = ctx.repo()
        pr = _pull(ctx, repo)
        if not pr.merged:
            raise not_found()
    return Reply(204)


@route("pulls/merge")
async def merge(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        pr = _pull(ctx, repo)
        git = sim.git_of(repo)
        method = ctx.field(
            "merge_method", str, required=False, default="merge", resource="PullRequest"
        )
        if method not in ("merge", "squash", "rebase"):
            raise invalid("PullRequest", "merge_method")
        if pr.issue.state != "open":
            raise ApiError(405, "Pull Request is not mergeable")
        sim.refresh_pull(repo, pr)
        head_sha = pr.head_sha
        expected = ctx.field("sha", str, required=False, resource="PullRequest")
        if expected is not None and expected != head_sha:
            raise ApiError(409, "Head branch was modified. Review and try the merge again.")
        status = mergeability(git, repo, pr)
        if status.state == "dirty":
            raise ApiError(405, "Pull Request is not mergeable")
        if status.state in ("blocked", "behind"):
            raise ApiError(405, status.reason or "Pull Request is not mergeable")
        default_title = (
            f"{pr.issue.title} (#{pr.number})"
            if method == "squash"
            else f"Merge pull request #{pr.number} from {sim.head_repo_of(repo, pr).owner}/{pr.head}"
        )
        title = ctx.field(
            "commit_title", str, required=False, default=default_title, resource="PullRequest"
        )
        message = ctx.field(
            "commit_message",
            str,
            required=False,
            default=pr.issue.title if method == "merge" else "",
            resource="PullRequest",
        )
        bot = sim.users[ctx.actor_login]
        before = git.branch_sha(pr.base)
        assert before is not None
        new_tip = merge_commit(
            git,
            pr,
            method,
            title,
            message,
            (bot.login, f"{bot.id}+{bot.login}@users.noreply.sim.invalid"),
        )
        if new_tip is None:
            raise ApiError(405, "Pull Request is not mergeable")
        git.update_ref(f"refs/heads/{pr.base}", new_tip, before)
        pr.head_sha = head_sha
        pr.base_sha = before
        pr.merged = True
        pr.merged_at = now_iso()
        pr.merged_by = ctx.actor_login
        pr.merge_commit_sha = new_tip
        pr.issue.state = "closed"
        pr.issue.closed_at = pr.issue.updated_at = pr.merged_at
        events.pull_request(sim, repo, pr, "closed", ctx.actor_login)
        sim.on_ref_changes(repo, {f"refs/heads/{pr.base}": (before, new_tip)}, ctx.actor_login)
        return Reply(
            200, {"sha": new_tip, "merged": True, "message": "Pull Request successfully merged"}
        )


@route("pulls/update-branch")
async def update_branch(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        pr = _pull(ctx, repo)
        git = sim.git_of(repo)
        if pr.issue.state != "open":
            raise ApiError(422, "Pull request is closed")
        if pr.head_repo is not None:
            raise ApiError(422, "The simulator does not update a fork's branch")
        head_sha = git.branch_sha(pr.head)
        base_sha = git.branch_sha(pr.base)
        if head_sha is None or base_sha is None:
            raise ApiError(422, "Branch not found")
        expected = ctx.field("expected_head_sha", str, required=False, resource="PullRequest")
        if expected is not None and expected != head_sha:
            raise ApiError(422, "expected head sha didn't match current head ref.")
        if git.is_ancestor(base_sha, head_sha):
            raise ApiError(422, "There are no new commits on the base branch.")
        tree = git.merge_tree(head_sha, base_sha)
        if tree is None:
            raise ApiError(422, "merge conflict between base and head")
        bot = sim.users[ctx.actor_login]
        sha = git.commit_tree(
            tree,
            [head_sha, base_sha],
            f"Merge branch '{pr.base}' into {pr.head}",
            (bot.login, f"{bot.id}+{bot.login}@users.noreply.sim.invalid"),
        )
        git.update_ref(f"refs/heads/{pr.head}", sha, head_sha)
        sim.on_ref_changes(repo, {f"refs/heads/{pr.head}": (head_sha, sha)}, ctx.actor_login)
        return Reply(
            202, {"message": "Updating pull request branch.", "url": sim.pull_json(repo, pr)["url"]}
        )


@route("pulls/list-reviews")
async def list_reviews(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        pr = _pull(ctx, repo)
        items = [
            ob.review_obj(sim.urls, repo, r, sim.users)
            for r in sorted(repo.reviews.values(), key=lambda r: r.id)
            if r.pr_number == pr.number
        ]
    chunk, headers = paginate(ctx, items)
    return Reply(200, chunk, headers)


@route("pulls/create-review")
async def create_review(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        pr = _pull(ctx, repo)
        sim.refresh_pull(repo, pr)
        event = ctx.field("event", str, required=False, resource="PullRequestReview")
        text = ctx.field("body", str, required=False, default="", resource="PullRequestReview")
        states = {
            "APPROVE": "APPROVED",
            "REQUEST_CHANGES": "CHANGES_REQUESTED",
            "COMMENT": "COMMENTED",
        }
        if event is not None and event not in states:
            raise invalid("PullRequestReview", "event")
        if event in ("REQUEST_CHANGES", "COMMENT") and not text:
            raise ApiError(422, "Unprocessable Entity", [f"Review body is required for {event}"])
        if event in ("APPROVE", "REQUEST_CHANGES") and pr.issue.user == ctx.actor_login:
            verb = "approve" if event == "APPROVE" else "request changes on"
            raise ApiError(422, "Unprocessable Entity", [f"Can not {verb} your own pull request"])
        commit_id = ctx.field(
            "commit_id", str, required=False, default=pr.head_sha, resource="PullRequestReview"
        )
        if not sim.commit_in_pull(repo, pr, commit_id):
            raise ApiError(422, "Unprocessable Entity", ["Commit must be part of the pull request"])
        items = ctx.field(
            "comments", list, required=False, default=[], resource="PullRequestReview"
        )
        try:
            placed = sim.place_comments(repo, pr, commit_id, items)
        except AnchorError as exc:
            raise ApiError(422, "Unprocessable Entity", [str(exc)]) from None
        except NotImplementedError as exc:
            raise _not_simulated(ctx, exc) from None
        review = sim.record_review(
            repo,
            pr,
            ctx.actor_login,
            states[event] if event else "PENDING",
            text,
            commit_id,
            placed,
        )
        return Reply(200, ob.review_obj(sim.urls, repo, review, sim.users))


def _not_simulated(ctx: Ctx, exc: NotImplementedError) -> ApiError:
    """Something GitHub does that the simulator does not: the test fails (a violation)."""
    ctx.sim.violation(f"{ctx.request.method} {ctx.request.path}: not simulated: {exc}")
    return ApiError(501, f"not simulated: {exc}")


@route("pulls/get-review")
async def get_review(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        pr = _pull(ctx, repo)
        return Reply(200, ob.review_obj(sim.urls, repo, _review(ctx, repo, pr), sim.users))


def _review(ctx: Ctx, repo: RepoState, pr: Pull) -> Review:
    review = repo.reviews.get(ctx.int_param("review_id"))
    if review is None or review.pr_number != pr.number:
        raise not_found()
    return review


def _visible(repo: RepoState, comment: ReviewComment) -> bool:
    """A pending review's comments are its author's draft: not listed until submitted."""
    return repo.reviews[comment.review_id].state != "PENDING"


@route("pulls/list-comments-for-review")
async def list_comments_for_review(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        review = _review(ctx, repo, _pull(ctx, repo))
        items = []
        for comment in sorted(repo.review_comments.values(), key=lambda c: c.id):
            if comment.review_id == review.id:
                obj = sim.review_comment_json(repo, comment)
                obj.setdefault("position", None)  # this form has it, null when outdated
                items.append(obj)
    chunk, headers = paginate(ctx, items)
    return Reply(200, chunk, headers)


def _review_comment(ctx: Ctx, repo: RepoState) -> ReviewComment:
    comment = repo.review_comments.get(ctx.int_param("comment_id"))
    if comment is None or not _visible(repo, comment):
        raise not_found()
    return comment


@route("pulls/list-review-comments")
async def list_review_comments(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        pr = _pull(ctx, repo)
        since = ctx.query.get("since")
        key = "updated_at" if ctx.query.get("sort") == "updated" else "created_at"
        comments = [
            c
            for c in repo.review_comments.values()
            if c.pr_number == pr.number
            and _visible(repo, c)
            and (since is None or c.updated_at >= since)
        ]
        comments.sort(key=lambda c: (getattr(c, key), c.id))
        if ctx.query.get("direction") == "desc":
            comments.reverse()
        items = [sim.review_comment_json(repo, c) for c in comments]
    chunk, headers = paginate(ctx, items)
    return Reply(200, chunk, headers)


@route("pulls/create-review-comment")
async def create_review_comment(ctx: Ctx) -> Reply:
    """One inline comment (a review of its own, COMMENTED), or with ``in_reply_to`` a reply
    (every other field is then ignored, as GitHub documents)."""
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        pr = _pull(ctx, repo)
        sim.refresh_pull(repo, pr)
        text = ctx.field("body", str, resource="PullRequestReviewComment")
        reply_to = ctx.field(
            "in_reply_to", int, required=False, resource="PullRequestReviewComment"
        )
        if reply_to is not None:
            top = repo.review_comments.get(reply_to)
            if top is None or top.pr_number != pr.number:
                raise not_found()
            comment = sim.record_reply(repo, pr, reply_to, ctx.actor_login, text)
        else:
            commit_id = ctx.field("commit_id", str, resource="PullRequestReviewComment")
            ctx.field("path", str, resource="PullRequestReviewComment")
            if not sim.commit_in_pull(repo, pr, commit_id):
                raise invalid(
                    "PullRequestReviewComment",
                    "commit_id",
                    "custom",
                    "commit_id is not part of the pull request",
                )
            body = dict(ctx.body) if isinstance(ctx.body, dict) else {}
            if body.get("line") is None and body.get("position") is None:
                raise invalid(
                    "PullRequestReviewComment", "line", "missing_field", "line is missing"
                )
            try:
                placed = sim.place_comments(repo, pr, commit_id, [body])
            except NotImplementedError as exc:
                raise _not_simulated(ctx, exc) from None
            except AnchorError as exc:
                raise ApiError(
                    422,
                    "Validation Failed",
                    [
                        {
                            "resource": "PullRequestReviewComment",
                            "code": "custom",
                            "field": "pull_request_review_thread."
                            + ("start_line" if "start line" in reason else "line"),
                            "message": reason,
                        }
                        for reason in exc.reasons
                    ],
                ) from None
            review = sim.record_review(
                repo, pr, ctx.actor_login, "COMMENTED", "", commit_id, placed
            )
            comment = next(c for c in repo.review_comments.values() if c.review_id == review.id)
        obj = sim.review_comment_json(repo, comment)
    return Reply(201, obj, {"Location": obj["url"]})


@route("pulls/create-reply-for-review-comment")
async def create_reply(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        pr = _pull(ctx, repo)
        text = ctx.field("body", str, resource="PullRequestReviewComment")
        top = repo.review_comments.get(ctx.int_param("comment_id"))
        if top is None or top.pr_number != pr.number or not _visible(repo, top):
            raise not_found()
        comment = sim.record_reply(repo, pr, top.id, ctx.actor_login, text)
        obj = sim.review_comment_json(repo, comment)
    return Reply(201, obj, {"Location": obj["url"]})


@route("pulls/get-review-comment")
async def get_review_comment(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        return Reply(200, sim.review_comment_json(repo, _review_comment(ctx, repo)))


@route("pulls/update-review-comment")
async def update_review_comment(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        comment = _review_comment(ctx, repo)
        text = ctx.field("body", str, resource="PullRequestReviewComment")
        old = comment.body
        comment.body = text
        comment.updated_at = now_iso()
        if old != text:
            events.review_comment(
                sim, repo, comment.id, "edited", ctx.actor_login, changes={"body": {"from": old}}
            )
        return Reply(200, sim.review_comment_json(repo, comment))


def _logins(ctx: Ctx, name: str, *, required: bool) -> list[str]:
    value = ctx.field(name, list, required=required, default=[], resource="PullRequest")
    if not all(isinstance(v, str) for v in value):
        raise invalid("PullRequest", name)
    return list(dict.fromkeys(value))


@route("pulls/list-requested-reviewers")
async def list_requested_reviewers(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        pr = _pull(ctx, repo)
        return Reply(200, ob.review_request_obj(sim.urls, sim.users, pr.requested_reviewers))


@route("pulls/request-reviewers")
async def request_reviewers(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        pr = _pull(ctx, repo)
        logins = _logins(ctx, "reviewers", required=False)
        if _logins(ctx, "team_reviewers", required=False):  # the simulator has no teams
            raise ApiError(
                422,
                "Reviews may only be requested from collaborators. One or more of the users "
                f"or teams you specified is not a collaborator of the {repo.full_name} "
                "repository.",
            )
        try:
            sim.request_reviews(repo, pr, logins, ctx.actor_login)
        except ValueError as exc:
            raise ApiError(422, str(exc)) from None
        return Reply(201, sim.pull_json(repo, pr))


@route("pulls/remove-requested-reviewers")
async def remove_requested_reviewers(ctx: Ctx) -> Reply:
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        pr = _pull(ctx, repo)
        logins = _logins(ctx, "reviewers", required=True)
        _logins(ctx, "team_reviewers", required=False)
        sim.unrequest_reviews(repo, pr, logins, ctx.actor_login)
        return Reply(200, sim.pull_json(repo, pr))


@route("pulls/list-commits")
async def list_commits(ctx: Ctx) -> Reply:
    """The pull request's commits, oldest first (GitHub lists at most 250)."""
    sim = ctx.sim
    with sim.lock:
        repo = ctx.repo()
        pr = _pull(ctx, repo)
        sim.refresh_pull(repo, pr)
        git = sim.git_of(repo)
        shas = git.rev_list(f"{pr.base_sha}..{pr.head_sha}", "--reverse")[:250]
        items = [ob.commit_obj(sim.urls, repo, git.commit_info(sha)) for sha in shas]
    chunk, headers = paginate(ctx, items)
    return Reply(200, chunk, headers)
