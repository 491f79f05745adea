"""The one error shape: a sentence for people and a word for programs."""

from typing import Any

from pydantic import BaseModel


class ErrorOut(BaseModel):
    detail: str
    code: str
    errors: list[dict[str, Any]] | None = None
