"""`notification`'s payload: one outbound HTTP call, and the credentials it may hold."""

import re
from typing import Any, Literal

from pydantic import BaseModel, Field, JsonValue, field_validator, model_validator

from app.core.masking import MASK, mask_urls
from app.core.ssrf import check_syntax
from app.schemas.payloads.base import PayloadSpec
from app.schemas.requests import REQUEST_CONFIG

MAX_HEADERS = 50
# The transport sets these from the URL and the body; a caller's value would contradict it.
REFUSED_HEADERS = {"host", "content-length", "transfer-encoding"}
HEADER_NAME = re.compile(r"[!#$%&'*+\-.^_`|~0-9A-Za-z]{1,256}")  # an RFC 9110 token
HEADER_VALUE = re.compile(r"[\t\x20-\x7e]{0,8192}")  # printable ASCII: no line breaks, nothing httpx cannot encode
# Headers whose values authenticate (any case): sealed at rest with the `secret`, shown as `***`.
CREDENTIAL_HEADERS = frozenset({"authorization", "proxy-authorization", "cookie", "x-api-key"})


class NotificationPayload(BaseModel):
    model_config = REQUEST_CONFIG | {
        "json_schema_extra": {
            "examples": [{"url": "https://hooks.example.com/notify", "body": {"text": "Report ready"}}]
        }
    }

    url: str = Field(
        max_length=2048,
        pattern=r"^https?://",
        description="An http(s) URL to call; the values of its credential-like query parameters (`access_token`, "
        "`key`, `signature`...) are sealed at rest and shown as `***`.",
    )
    method: Literal["POST", "PUT", "PATCH", "GET", "DELETE"] = "POST"
    headers: dict[str, str] = Field(
        default_factory=dict,
        max_length=MAX_HEADERS,
        description="Sent with the call; the values of `Authorization`, `Proxy-Authorization`, `Cookie` and "
        "`X-Api-Key` are sealed at rest and shown as `***`.",
    )
    body: JsonValue = Field(default=None, description="Sent as compact JSON; nothing is sent when null.")
    secret: str | None = Field(
        default=None,
        max_length=200,
        description="Signs the call like a webhook delivery (`whsec_…` or any string); sealed at rest, shown as `***`.",
    )
    timeout: float = Field(default=10, gt=0, le=60, description="Seconds to wait for the answer.")
    include_dependencies: bool = Field(
        default=False,
        description="In a workflow: add `dependencies` to the body object, the results of the jobs this one depends "
        "on, by their refs (a render's `artifact_url`, say). The body must then be an object, or null for one "
        "holding `dependencies` alone.",
    )

    @model_validator(mode="after")
    def _room_for_dependencies(self) -> "NotificationPayload":
        if self.include_dependencies and not (self.body is None or isinstance(self.body, dict)):
            raise ValueError("with include_dependencies, body must be a JSON object (or null)")
        return self

    @field_validator("url")
    @classmethod
    def _plain_url(cls, value: str) -> str:
        check_syntax(value)
        return value

    @field_validator("headers")
    @classmethod
    def _sendable(cls, value: dict[str, str]) -> dict[str, str]:
        for name, header in value.items():
            if name.lower() in REFUSED_HEADERS:
                raise ValueError(f"the {name} header is set by the service and cannot be given")
            if not HEADER_NAME.fullmatch(name):
                raise ValueError(f"{name!r} is not a valid header name")
            if not HEADER_VALUE.fullmatch(header):
                raise ValueError(f"the {name} header's value must be printable ASCII, at most 8192 characters")
        return value


def credentials(payload: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """The payload with `***` for its `secret`, its credential headers' values and its URL's credential-like query
    values, and what they were."""
    headers: dict[str, Any] = payload.get("headers") or {}
    url, hidden = payload.get("url"), {}
    if payload.get("secret") is not None:
        hidden["secret"] = payload["secret"]
    if isinstance(url, str) and (shown_url := mask_urls(url)) != url:
        hidden["url"] = url
    if taken := {name: value for name, value in headers.items() if name.lower() in CREDENTIAL_HEADERS}:
        hidden["headers"] = taken
    if not hidden:
        return payload, {}
    shown = {**payload, **dict.fromkeys(hidden.keys() & {"secret"}, MASK)}
    if "url" in hidden:
        shown["url"] = shown_url
    if taken:
        shown["headers"] = {**headers, **dict.fromkeys(taken, MASK)}
    return shown, hidden


SPEC = PayloadSpec(
    "notification",
    NotificationPayload,
    "Makes one HTTP call (an HTTP target: any service as a handler), signed like a webhook delivery with a "
    "`secret`; a 2xx answer's JSON body is the result; 5xx and timeouts are retried, after a 429's or 503's "
    "Retry-After.",
    urls=lambda payload: {"url": payload.url},
    credentials=credentials,
)
