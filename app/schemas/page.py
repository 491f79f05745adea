"""One page of a list, newest first: its items, and the cursor to the next page (app/core/cursors.py; the query,
app/stores/pagination.py)."""

from typing import Generic, TypeVar

from pydantic import BaseModel

Item = TypeVar("Item", bound=BaseModel)


class Page(BaseModel, Generic[Item]):
    items: list[Item]
    next_cursor: str | None
