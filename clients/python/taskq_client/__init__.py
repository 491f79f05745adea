"""A typed Python client of the task queue service: `Client` (sync) and `AsyncClient` (asyncio), every call of the
API with its models (`taskq_client.models`), errors as `ApiError`, live events as iterators, and `verify_webhook`
for receivers. See README.md."""

from taskq_client import models
from taskq_client._base import ApiError
from taskq_client._operations import API_VERSION
from taskq_client.client import AsyncClient, Client, Page
from taskq_client.sse import Event
from taskq_client.webhooks import WebhookVerificationError, verify_webhook

__version__ = API_VERSION
__all__ = [
    "API_VERSION",
    "ApiError",
    "AsyncClient",
    "Client",
    "Event",
    "Page",
    "WebhookVerificationError",
    "models",
    "verify_webhook",
]
