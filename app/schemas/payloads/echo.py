"""`echo`'s payload: any JSON value."""

from typing import Any

from pydantic import RootModel

from app.schemas.payloads.base import PayloadSpec


class EchoPayload(RootModel[Any]):
    """Any JSON value."""


SPEC = PayloadSpec("echo", EchoPayload, "Returns its payload as the result.")
