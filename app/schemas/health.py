"""The readiness answer."""

from pydantic import BaseModel


class ReadyOut(BaseModel):
    status: str
    components: dict[str, str]
