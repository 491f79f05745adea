"""What every request body model shares: unknown fields are refused, and a JSON value keeps its JSON type, as the
OpenAPI schema says (pydantic's lax default would take `true` for the number 1). A field read from text, such
as a time, says `Field(strict=False)`."""

from pydantic import ConfigDict

REQUEST_CONFIG = ConfigDict(extra="forbid", strict=True)
