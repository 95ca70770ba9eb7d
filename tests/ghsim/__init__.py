"""An offline GitHub for tests: REST slice, webhooks, git over HTTP, all checked against
GitHub's own OpenAPI description and webhook schema."""

from .actions import WorkflowDispatch, WorkflowOutcome
from .deliveries import DeliveryRecord
from .server import GitHubSimulator, Repo
from .webhooks import DeliverySchemaError, build_delivery, delivery_headers, sign

__all__ = [
    "DeliveryRecord",
    "DeliverySchemaError",
    "GitHubSimulator",
    "Repo",
    "WorkflowDispatch",
    "WorkflowOutcome",
    "build_delivery",
    "delivery_headers",
    "sign",
]
