"""Apply the Alembic migrations programmatically (`python -m app migrate`, `make run`, tests)."""

from pathlib import Path

from alembic.config import Config

from alembic import command

ROOT = Path(__file__).resolve().parents[2]


def alembic_config(url: str) -> Config:
    """An Alembic config pointing at this project's migrations and the given database."""
    config = Config(str(ROOT / "alembic.ini"))
    config.set_main_option("script_location", str(ROOT / "alembic"))
    config.attributes["url"] = url
    return config


def upgrade(url: str) -> None:
    """Bring the database at `url` to the newest schema."""
    command.upgrade(alembic_config(url), "head")
