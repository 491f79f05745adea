"""A job's file (a PDF, an image): its bytes in the database or in a directory, its metadata here."""

from datetime import datetime

from sqlalchemy import Integer, String
from sqlalchemy.orm import Mapped, mapped_column

from app.models.base import Base
from app.models.types import Blob, UTCDateTime


class Artifact(Base):
    __tablename__ = "artifacts"

    job_id: Mapped[str] = mapped_column(String(36), primary_key=True)
    client_id: Mapped[str] = mapped_column(String(64))
    content_type: Mapped[str] = mapped_column(String(100))
    filename: Mapped[str] = mapped_column(String(255))
    size: Mapped[int] = mapped_column(Integer)
    sha256: Mapped[str] = mapped_column(String(64))
    # Exactly one of these holds the bytes, by ARTIFACT_STORAGE: the row itself, or a file under ARTIFACT_DIR.
    data: Mapped[bytes | None] = mapped_column(Blob, nullable=True)
    path: Mapped[str | None] = mapped_column(String(500), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime, index=True)
