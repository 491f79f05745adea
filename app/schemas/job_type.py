"""Job types as operators see and steer them: paused or not, and how many jobs wait or run."""

from typing import Any

from pydantic import BaseModel, Field


class JobTypeOut(BaseModel):
    """One job type."""

    name: str
    description: str
    paused: bool = Field(description="Paused: no new job of this type starts; its jobs wait, `queued`.")
    queued: int = Field(description="Your jobs of this type waiting to start (`pending` or `queued`); an admin's: all.")
    running: int = Field(description="Your jobs of this type running now; an admin's: all.")
    payload_schema: dict[str, Any] = Field(
        description="The JSON Schema of its payload (a plugin's type's too: docs/plugins.md)."
    )


class JobTypesOut(BaseModel):
    items: list[JobTypeOut]
