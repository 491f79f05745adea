"""An endpoint's deliveries by time: (endpoint_id, created_at, id), which the endpoint's delivery table pages by
(newest first, whatever the filters) and its stats read a window of. It takes the place of the index on
endpoint_id alone, whose every use it serves as its leading column, so a delivery's insert writes no more index
entries than before.

Revision ID: 0018
Revises: 0017
Create Date: 2026-12-07
"""

from collections.abc import Sequence

from alembic import op

revision: str = "0018"
down_revision: str | None = "0017"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    op.create_index("ix_deliveries_endpoint_created", "deliveries", ["endpoint_id", "created_at", "id"])
    op.drop_index("ix_deliveries_endpoint_id", table_name="deliveries")


def downgrade() -> None:
    op.create_index("ix_deliveries_endpoint_id", "deliveries", ["endpoint_id"])
    op.drop_index("ix_deliveries_endpoint_created", table_name="deliveries")
