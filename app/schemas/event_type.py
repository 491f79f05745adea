"""The event catalogue as clients see it: what a webhook receiver can get."""

from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class EventTypeOut(BaseModel):
    type: str = Field(description="The event's `type`, as its body and `events` name it.")
    description: str
    subscribable: bool = Field(description="An endpoint may name it in `events` (`webhook.test` is sent, never named).")
    default: bool = Field(description="An endpoint created without `events` gets it.")
    example: dict[str, Any] = Field(description="A body as a receiver gets it, made by the code that makes real ones.")
    body_schema: dict[str, Any] = Field(
        alias="schema",
        description="The JSON Schema (2020-12) of its body, made from the types the code that builds it returns.",
    )

    model_config = ConfigDict(populate_by_name=True, serialize_by_alias=True)
