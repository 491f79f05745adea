"""Who is calling, and the one rule of what they may see: their own client's rows (admins: all)."""

from dataclasses import dataclass

from sqlalchemy import ColumnElement, Table, true


@dataclass(frozen=True)
class Principal:
    key_id: str | None
    client_id: str
    admin: bool


def visible_to(table: Table, principal: Principal) -> ColumnElement[bool]:
    """The WHERE clause that hides other clients' rows; another client's row then reads as missing."""
    if principal.admin:
        return true()
    return table.c.client_id == principal.client_id
