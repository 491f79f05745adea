"""Whose rows a read may see: one client's, or every client's (`None`, an admin's read). Another client's row then
reads as missing."""

from sqlalchemy import ColumnElement, Table, true


def owned_by(table: Table, client_id: str | None) -> ColumnElement[bool]:
    """The WHERE clause that keeps `client_id`'s rows of `table`; every row when `client_id` is None."""
    if client_id is None:
        return true()
    return table.c.client_id == client_id
