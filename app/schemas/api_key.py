"""API key requests and responses."""

from datetime import datetime

from pydantic import BaseModel, Field

from app.schemas.requests import REQUEST_CONFIG


class ApiKeyCreate(BaseModel):
    model_config = REQUEST_CONFIG

    client_id: str = Field(
        min_length=1,
        max_length=64,
        pattern=r"^[A-Za-z0-9_.\-]+$",
        description="The client the key acts for; `admin`, the admin's own client, only for an admin key.",
    )
    admin: bool = False


class ApiKeyOut(BaseModel):
    id: str
    client_id: str
    admin: bool
    prefix: str
    created_at: datetime
    revoked_at: datetime | None


class ApiKeyCreated(BaseModel):
    """The one answer that ever shows the key itself."""

    id: str
    client_id: str
    admin: bool
    api_key: str
    created_at: datetime


class WhoAmIOut(BaseModel):
    client_id: str
    admin: bool
