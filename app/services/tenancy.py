"""Who is calling, and the one rule of what they may see: their own client's rows (admins: all)."""

from dataclasses import dataclass

from sqlalchemy import ColumnElement, Table

from app.stores.owned import owned_by


@dataclass(frozen=True)
class Principal:
    key_id: str | None
    client_id: str
    admin: bool

    @property
    def scope(self) -> str | None:
        """Whose rows the caller may see, as the stores take it: their client's; every client's (None) for an
        admin."""
        return None if self.admin else self.client_id


def visible_to(table: Table, principal: Principal) -> ColumnElement[bool]:
    """The WHERE clause that hides other clients' rows; another client's row then reads as missing."""
    return owned_by(table, principal.scope)


def sees(principal: Principal, client_id: str | None) -> bool:
    """The same rule for a row already in hand (a job event on the broker): is it the caller's to see?"""
    return principal.admin or client_id == principal.client_id
