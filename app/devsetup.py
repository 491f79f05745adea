"""`make run`'s one-time set-up: the dev keys of the settings table, saved in `.env`."""

import os
from pathlib import Path

from cryptography.fernet import Fernet

from app.services.api_keys import new_key


def ensure_dev_keys(env_file: Path) -> str | None:
    """Create ADMIN_API_KEY and SECRET_ENCRYPTION_KEY in `.env` where unset; return a new admin key."""
    existing = {name: value for name, value in _read(env_file).items() if value}
    added: dict[str, str] = {}
    if "ADMIN_API_KEY" not in existing and not os.environ.get("ADMIN_API_KEY"):
        added["ADMIN_API_KEY"] = new_key()
    # Never regenerated silently: losing it makes stored webhook secrets unreadable.
    if "SECRET_ENCRYPTION_KEY" not in existing and not os.environ.get("SECRET_ENCRYPTION_KEY"):
        added["SECRET_ENCRYPTION_KEY"] = Fernet.generate_key().decode()
    if added:
        # Empty placeholders (as copied from .env.example) would hide the new values: drop them.
        kept = [line for line in env_file.read_text().splitlines() if line.split("=", 1)[0].strip() not in added]
        env_file.write_text("".join(f"{line}\n" for line in kept))
        with env_file.open("a") as out:
            out.write("# Created by `make run` for local development. Keep SECRET_ENCRYPTION_KEY: losing it\n")
            out.write("# makes stored webhook secrets unreadable.\n")
            out.writelines(f"{name}={value}\n" for name, value in added.items())
    return added.get("ADMIN_API_KEY")


def _read(env_file: Path) -> dict[str, str]:
    if not env_file.exists():
        env_file.touch(mode=0o600)
        return {}
    pairs = (line.split("=", 1) for line in env_file.read_text().splitlines() if "=" in line)
    return {name.strip(): value.strip() for name, value in pairs if not name.strip().startswith("#")}
