"""What concurrency keys and rate limits keep beside the jobs (docs/flow-control.md): the row each key's
admissions lock, and the starts of each rate window."""

from datetime import datetime

from sqlalchemy import Index, Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base
from app.models.types import BigId, UTCDateTime


class FlowKey(Base):
    """One client's key of one kind (`concurrency` or `rate`): the row its admissions lock (an UPDATE of
    `version`), so two processes never both take a key's last slot or start."""

    __tablename__ = "flow_keys"

    client_id: Mapped[str] = mapped_column(String(64), primary_key=True)
    kind: Mapped[str] = mapped_column(String(16), primary_key=True)
    key: Mapped[str] = mapped_column(String(255), primary_key=True)
    version: Mapped[int] = mapped_column(Integer)


class FlowStart(Base):
    """One start granted under a rate key: a window counts the rows younger than its period."""

    __tablename__ = "flow_starts"

    id: Mapped[int] = mapped_column(BigId, primary_key=True, autoincrement=True)
    client_id: Mapped[str] = mapped_column(String(64))
    key: Mapped[str] = mapped_column(String(255))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime)

    __table_args__ = (Index("ix_flow_starts_key", "client_id", "key", "started_at"),)
