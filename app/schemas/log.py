"""A recent log record, as the logs route serves it."""

from pydantic import BaseModel


class LogRecordOut(BaseModel):
    time: str
    level: str
    process: str
    logger: str
    message: str
    request_id: str | None
