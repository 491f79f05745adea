"""What a job type accepts, as the API checks it at submit time: its payload model, and where that payload holds
URLs and credentials. Nothing here runs a job (that is `app/handlers/`), so the API loads no PDF or image library."""

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

Urls = Callable[[Any], dict[str, str]]
# A submitted payload (as JSON) -> (the payload as it may be stored and shown, with `***` for each credential;
# the credentials, in the payload's shape, or {} when there are none).
Credentials = Callable[[dict[str, Any]], tuple[dict[str, Any], dict[str, Any]]]


def no_urls(_: Any) -> dict[str, str]:
    return {}


@dataclass(frozen=True)
class PayloadSpec:
    """A job type's name, description and payload model, and what the API must know of its payloads."""

    name: str
    model: type[BaseModel]
    description: str
    # The tags of a union payload model, which pydantic puts in an error's path after `payload`; clients' paths
    # do not have them.
    union_tags: frozenset[str] = frozenset()
    # The URLs the handler will call, by payload field: checked by the SSRF guard at submit time as well.
    urls: Urls = no_urls
    # Where the payload holds credentials: sealed at rest, shown as `***`, handed back to the handler alone
    # (services/payload_secrets.py).
    credentials: Credentials | None = None
