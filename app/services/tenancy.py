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


def sees(principal: Principal, client_id: str | None) -> bool:
    """The same rule for a row already in hand (a job event on the broker): is it the caller's to see?"""
    return principal.admin or client_id == principal.client_id
