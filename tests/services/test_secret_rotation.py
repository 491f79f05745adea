"""Rotating SECRET_ENCRYPTION_KEY: a list of keys (the first seals, all open) and `python -m app rotate-secrets`,
which re-seals every stored webhook secret with the first key."""

import subprocess
import sys

import pytest
from cryptography.fernet import Fernet
from sqlalchemy import select

from app.core.database import make_engine
from app.core.messages import dumps
from app.core.redaction import REDACTED, Redactor
from app.core.secret_box import SecretBox, SecretsUnavailable
from app.main import create_app
from app.models.tables import CLIENT_SECRETS, ENDPOINTS, JOBS
from tests.conftest import ADMIN_KEY, make_settings, settings_env
from tests.support import ROOT, api_with

OLD, NEW = "the-old-passphrase-for-secrets", Fernet.generate_key().decode()


def test_the_first_key_seals_and_every_key_opens() -> None:
    sealed_old = SecretBox(OLD).seal("whsec_one")
    both = SecretBox(f"{NEW}, {OLD}")
    sealed_new = both.seal("whsec_two")
    assert both.open(sealed_old) == "whsec_one" and both.open(sealed_new) == "whsec_two"
    assert SecretBox(NEW).open(sealed_new) == "whsec_two"  # sealed with the first key alone
    with pytest.raises(SecretsUnavailable, match="rotate-secrets"):
        SecretBox(NEW).open(sealed_old)
    assert both.reseal(sealed_new) is None
    resealed = both.reseal(sealed_old)
    assert resealed is not None and SecretBox(NEW).open(resealed) == "whsec_one"
    with pytest.raises(SecretsUnavailable):
        SecretBox("an-unrelated-key-entirely").reseal(sealed_old)


def test_every_key_of_the_list_is_redacted_from_logs() -> None:
    redact = Redactor.for_settings(make_settings(secret_encryption_key=f"{NEW},{OLD}"))
    assert redact(f"keys {NEW} and {OLD}") == f"keys {REDACTED} and {REDACTED}"


async def test_rotate_secrets_reseals_every_stored_secret_with_the_first_key(sqlite_url: str) -> None:
    shown = await _stored_secrets(sqlite_url)
    first = _rotate(sqlite_url, f"{NEW},{OLD}")
    assert first.returncode == 0, first.stderr
    # three endpoints, one previous secret, one default, one notification job's credentials
    assert "Re-encrypted 6 stored secret(s)" in first.stdout
    again = _rotate(sqlite_url, f"{NEW},{OLD}")
    assert "Re-encrypted 0 stored secret(s)" in again.stdout, again.stdout + again.stderr
    sealed = await _sealed(sqlite_url)
    assert len(sealed) == 6
    assert sorted(SecretBox(NEW).open(value) for value in sealed) == sorted(shown)
    for value in sealed:
        with pytest.raises(SecretsUnavailable):
            SecretBox(OLD).open(value)
    assert "Re-encrypted 0" in _rotate(sqlite_url, NEW).stdout  # the old key can go now


async def test_rotate_secrets_stops_on_a_secret_no_key_opens(sqlite_url: str) -> None:
    await _stored_secrets(sqlite_url)
    dropped_too_soon = _rotate(sqlite_url, NEW)
    assert dropped_too_soon.returncode == 1 and "does not open with any key" in dropped_too_soon.stderr
    no_key = _rotate(sqlite_url, "")
    assert no_key.returncode == 2 and "SECRET_ENCRYPTION_KEY" in no_key.stderr


async def _stored_secrets(url: str) -> list[str]:
    """Three endpoints (one rotated), the client's default secret and a notification job's credentials, sealed with
    OLD; every secret shown (the job's as it is sealed: its credentials as JSON)."""
    async with api_with(create_app(make_settings(database_url=url, secret_encryption_key=OLD)), ADMIN_KEY) as api:
        headers = await api.new_client("rotation")
        hooks = [
            (await api.client.post("/api/v1/webhooks", json={"url": f"http://127.0.0.1:9/{n}"}, headers=headers)).json()
            for n in range(3)
        ]
        rotated = await api.client.post(f"/api/v1/webhooks/{hooks[0]['id']}/rotate-secret", headers=headers)
        default = await api.client.get("/api/v1/webhooks/default-secret", headers=headers)
        credentials = {"secret": "job-secret-0123", "headers": {"Authorization": "Bearer job-token-4567"}}
        payload = {"url": "http://127.0.0.1:9/n", **credentials}
        job = {"job_type": "notification", "payload": payload, "delay_seconds": 3600}
        assert (await api.client.post("/api/v1/jobs", json=job, headers=headers)).status_code == 201
    shown = [hook["secret"] for hook in hooks] + [rotated.json()["secret"], default.json()["secret"]]
    return [*shown, dumps(credentials).decode()]


def _rotate(url: str, keys: str) -> subprocess.CompletedProcess[str]:
    env = settings_env(make_settings(database_url=url, secret_encryption_key=keys or None))
    command = [sys.executable, "-m", "app", "rotate-secrets", "--batch-rows", "2"]
    return subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)


async def _sealed(url: str) -> list[str]:
    engine = make_engine(url)
    try:
        async with engine.connect() as conn:
            endpoints = (await conn.execute(select(ENDPOINTS.c.secret, ENDPOINTS.c.previous_secret))).all()
            defaults = (await conn.execute(select(CLIENT_SECRETS.c.secret))).scalars().all()
            jobs = (await conn.execute(select(JOBS.c.sealed).where(JOBS.c.sealed.is_not(None)))).scalars().all()
    finally:
        await engine.dispose()
    return [value for row in endpoints for value in row if value] + list(defaults) + list(jobs)
