"""Job types an operator paused: their jobs wait in the database until the type is resumed."""

from datetime import datetime

from sqlalchemy import String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base
from app.models.types import UTCDateTime


class JobTypePause(Base):
    """One paused job type; resuming it deletes the row."""

    __tablename__ = "job_type_pauses"

    job_type: Mapped[str] = mapped_column(String(64), primary_key=True)
    paused_at: Mapped[datetime] = mapped_column(UTCDateTime)
