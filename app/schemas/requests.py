"""What every request body model shares: unknown fields are refused, and a JSON value keeps its JSON type, as the
OpenAPI schema says (pydantic's lax default would take `true` for the number 1). A field read from text, such
as a time, says `Field(strict=False)`."""

from typing import Annotated, Any

from pydantic import AwareDatetime, BeforeValidator, ConfigDict, Field

REQUEST_CONFIG = ConfigDict(extra="forbid", strict=True)


def _text(value: Any) -> Any:
    if not isinstance(value, str):
        raise ValueError("give a time as ISO 8601 text with an offset, such as 2026-12-01T09:00:00+01:00")
    return value


# A time in a request: ISO 8601 text with an offset, read from that text (a number is no time here).
RequestTime = Annotated[AwareDatetime, BeforeValidator(_text), Field(strict=False)]


def _whole(value: Any) -> Any:
    return int(value) if isinstance(value, float) and value.is_integer() else value


# An integer in a request, as JSON Schema's "integer" reads: a number with no fraction, so `6.0` is 6 (strict
# mode alone would refuse it); `6.5`, a bool or text stays refused.
WholeNumber = Annotated[int, BeforeValidator(_whole)]
