"""Deliveries: schema-valid, signed, posted in order, held, redelivered."""

from __future__ import annotations

import json

import pytest
from ghsim_helpers import Receiver
from gidgethub import sansio

from ghsim import DeliverySchemaError, build_delivery, delivery_headers, sign
from ghsim.fixture import WEBHOOK_SECRET
from ghsim.server import GitHubSimulator
from ghsim.webhooks import schema_errors

REPO = "octo/demo"


def test_person_actions_deliver_valid_signed_payloads(
    github_sim: GitHubSimulator, receiver: Receiver
) -> None:
    sim = github_sim
    sim.set_webhook(receiver.url, WEBHOOK_SECRET)
    sim.create_repo("octo", "demo", {"README.md": "x\n"})
    inst = sim.install("octo", ["demo"])
    number = sim.open_issue(REPO, "Title", "Body", "alice")
    sim.label_issue(REPO, number, "scaffold", "alice")
    sim.unlabel_issue(REPO, number, "scaffold", "alice")
    sim.comment(REPO, number, "hello", "alice")
    sim.push_files(REPO, "feature", {"a.txt": "a\n"}, "alice", "Add a")
    sim.wait_deliveries()
    kinds = [(d.event, d.action) for d in sim.deliveries]
    assert kinds == [
        ("installation", "created"),
        ("issues", "opened"),
        ("issues", "labeled"),
        ("issues", "unlabeled"),
        ("issue_comment", "created"),
        ("push", None),
        ("check_suite", "requested"),
    ]
    assert len(receiver.received) == len(kinds)
    # Installation events have a lane of their own, posted beside the repository's lane:
    # the receiver may get them in either order, so each delivery is found by its id.
    by_id = {got.headers["X-GitHub-Delivery"]: got for got in receiver.received}
    assert sorted(by_id) == sorted(d.delivery_id for d in sim.deliveries)
    repo_order = [g.headers["X-GitHub-Event"] for g in receiver.received]
    assert [e for e in repo_order if e != "installation"] == [
        e for e, _ in kinds if e != "installation"
    ]
    for record in sim.deliveries:
        got = by_id[record.delivery_id]
        assert record.status_code == 200
        assert schema_errors(record.event, record.action, record.payload) == []
        event = sansio.Event.from_http(
            {k.lower(): v for k, v in got.headers.items()}, got.body, secret=WEBHOOK_SECRET
        )
        assert event.event == record.event
        assert event.delivery_id == record.delivery_id
        assert got.headers["User-Agent"] == "GitHub-Hookshot/sim"
        assert got.headers["X-GitHub-Hook-Installation-Target-ID"] == str(sim.app_id)
        if record.event != "installation":
            assert event.data["installation"]["id"] == inst
        assert "https://api.github.com" not in got.body.decode()
        assert "https://github.com" not in got.body.decode()
    labeled = sim.deliveries_of("issues", "labeled")[0].payload
    assert labeled["label"]["name"] == "scaffold"
    assert labeled["issue"]["number"] == number
    assert labeled["sender"]["login"] == "alice"
    assert labeled["repository"]["full_name"] == REPO


def test_wrong_secret_fails_gidgethub_verification(
    github_sim: GitHubSimulator, receiver: Receiver
) -> None:
    from gidgethub import ValidationFailure

    sim = github_sim
    sim.set_webhook(receiver.url, "other-secret")
    sim.create_repo("octo", "demo", {"README.md": "x\n"})
    sim.open_issue(REPO, "t", "b", "alice")
    sim.wait_deliveries()
    got = receiver.received[-1]
    with pytest.raises(ValidationFailure):
        sansio.Event.from_http(
            {k.lower(): v for k, v in got.headers.items()}, got.body, secret=WEBHOOK_SECRET
        )


def test_held_deliveries_are_dropped_and_redelivery_reuses_the_id(
    github_sim: GitHubSimulator, receiver: Receiver
) -> None:
    sim = github_sim
    sim.set_webhook(receiver.url, WEBHOOK_SECRET)
    sim.create_repo("octo", "demo", {"README.md": "x\n"})
    sim.install("octo", ["demo"])
    sim.hold_deliveries(True)
    number = sim.open_issue(REPO, "t", "b", "alice")
    sim.label_issue(REPO, number, "scaffold", "alice")
    sim.hold_deliveries(False)
    sim.wait_deliveries()
    assert len(receiver.received) == 1  # only installation.created
    lost = sim.deliveries_of("issues", "labeled")[0]
    assert lost.held
    assert lost.status_code is None
    again = sim.redeliver(lost.delivery_id)
    sim.wait_deliveries()
    assert again.status_code == 200
    assert receiver.received[-1].headers["X-GitHub-Delivery"] == lost.delivery_id
    assert receiver.received[-1].body == lost.body


def test_every_kind_builds_and_validates() -> None:
    for event, action in [
        ("issues", "opened"),
        ("issues", "labeled"),
        ("issues", "unlabeled"),
        ("issue_comment", "created"),
        ("pull_request", "opened"),
        ("pull_request", "closed"),
        ("pull_request", "synchronize"),
        ("pull_request_review", "submitted"),
        ("push", None),
        ("check_run", "created"),
        ("check_run", "completed"),
        ("check_suite", "requested"),
        ("check_suite", "rerequested"),
        ("check_suite", "completed"),
        ("installation", "created"),
        ("workflow_run", "requested"),
        ("workflow_run", "in_progress"),
        ("workflow_run", "completed"),
        ("workflow_job", "queued"),
        ("workflow_job", "in_progress"),
        ("workflow_job", "completed"),
    ]:
        payload = build_delivery(event, action, {}, api="http://127.0.0.1:1")
        if action:
            assert payload["action"] == action
        assert "api.github.com" not in json.dumps(payload)


def test_build_delivery_rejects_a_payload_that_breaks_the_schema() -> None:
    with pytest.raises(DeliverySchemaError):
        build_delivery("issues", "labeled", {"issue": {"number": "not-a-number"}})


def test_sign_and_headers_match_gidgethub() -> None:
    body = json.dumps(build_delivery("ping", None, {})).encode()
    headers = delivery_headers("ping", body, "s3cret", "fixed-id")
    assert headers["X-Hub-Signature-256"] == sign(body, "s3cret")
    event = sansio.Event.from_http(
        {k.lower(): v for k, v in headers.items()}, body, secret="s3cret"
    )
    assert event.delivery_id == "fixed-id"
    assert event.event == "ping"
