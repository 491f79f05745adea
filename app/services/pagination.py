"""Opaque keyset cursors over (created_at, id), newest first."""

import base64
import binascii
import json
from datetime import datetime
from typing import Any

from sqlalchemy import ColumnElement, and_, or_


class BadCursor(ValueError):
    """A cursor this service did not hand out."""


def encode(created_at: datetime, row_id: str) -> str:
    raw = json.dumps([created_at.isoformat(), row_id]).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(cursor: str) -> tuple[datetime, str]:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        stamp, row_id = json.loads(raw)
        return datetime.fromisoformat(stamp), str(row_id)
    except (binascii.Error, ValueError, TypeError) as exc:
        raise BadCursor("cursor is not one this service returned; start again without it") from exc


def older_than(created: ColumnElement[Any], ident: ColumnElement[Any], cursor: str) -> ColumnElement[bool]:
    """Rows after the cursor in newest-first order, spelled out (row values are not T-SQL)."""
    stamp, row_id = decode(cursor)
    return or_(created < stamp, and_(created == stamp, ident < row_id))
