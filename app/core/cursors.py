"""Opaque keyset cursors over (created_at, id): a cursor names its list, the time and the id of the last row
served, in one canonical spelling; anything else (forged, truncated, from another list) is a `BadCursor`, refused
before any query is run. The query that pages by them is `app/stores/pagination.py`."""

import base64
import binascii
import json
import uuid
from collections.abc import Callable
from datetime import datetime

MAX_CURSOR_LENGTH = 256  # ours are about 120 characters


class BadCursor(ValueError):
    """A cursor this service did not hand out."""


def encode(listing: str, created_at: datetime, row_id: str) -> str:
    """The cursor to the rows after (created_at, row_id) in the list named `listing`."""
    raw = json.dumps([listing, created_at.isoformat(), row_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def uuid_text(row_id: str) -> str:
    """A row id as a UUID's canonical text; ValueError for anything else."""
    return str(uuid.UUID(row_id))


def decode(listing: str, cursor: str, ident: Callable[[str], str] = uuid_text) -> tuple[datetime, str]:
    """The position a cursor of `listing` names; BadCursor for any text `encode` would not have made. `ident`
    spells a row id canonically (ValueError for one the list cannot hold): a UUID's by default."""
    try:
        if len(cursor) > MAX_CURSOR_LENGTH:
            raise ValueError("too long")
        raw = base64.b64decode(cursor + "=" * (-len(cursor) % 4), altchars=b"-_", validate=True)
        named, stamp, row_id = json.loads(raw)
        position = datetime.fromisoformat(stamp), ident(row_id)
        if position[0].tzinfo is None or encode(named, *position) != cursor or named != listing:
            raise ValueError("not a cursor of this list")
        return position
    except (binascii.Error, ValueError, TypeError, AttributeError) as exc:
        raise BadCursor("cursor is not one this list returned; start again without it") from exc
