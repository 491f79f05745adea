"""What signing a claimed delivery needs: its endpoint's secrets, newest first, or for a job's callback URL its
client's default secret (created on first use)."""

from datetime import datetime

from sqlalchemy import insert, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.ext.asyncio import AsyncConnection

from app.core.secret_box import SecretBox
from app.core.signing import new_secret
from app.models.rows import DeliveryRow, EndpointKeys
from app.models.tables import CLIENT_SECRETS
from app.models.types import utcnow


async def client_secret(conn: AsyncConnection, box: SecretBox, client_id: str) -> str:
    """The client's default secret, created (once, even under a race) when missing."""
    query = select(CLIENT_SECRETS.c.secret).where(CLIENT_SECRETS.c.client_id == client_id)
    sealed = (await conn.execute(query)).scalar_one_or_none()
    if sealed is None:
        secret = new_secret()
        try:
            async with conn.begin_nested():
                await conn.execute(
                    insert(CLIENT_SECRETS).values(client_id=client_id, secret=box.seal(secret), created_at=utcnow())
                )
            return secret
        except IntegrityError:
            sealed = (await conn.execute(query)).scalar_one()
    return box.open(sealed)


async def callers(conn: AsyncConnection, box: SecretBox, claimed: list[DeliveryRow]) -> dict[str, str]:
    """The default secret of each client whose callback delivery was claimed."""
    found = {d["client_id"]: "" for d in claimed if d["endpoint_id"] is None}
    for client_id in found:
        found[client_id] = await client_secret(conn, box, client_id)
    return found


def signing(
    box: SecretBox,
    claimed: list[DeliveryRow],
    endpoints: dict[str, EndpointKeys],
    callers: dict[str, str],
    now: datetime,
) -> tuple[dict[str, list[str]], set[str]]:
    """Each claimed delivery's signing secrets, newest first (none when its endpoint is gone or disabled), and the
    endpoints that are failing."""
    found: dict[str, list[str]] = {}
    for delivery in claimed:
        if delivery["endpoint_id"] is None:
            found[delivery["id"]] = [callers[delivery["client_id"]]]
            continue
        endpoint = endpoints.get(delivery["endpoint_id"])
        if endpoint is None or endpoint["deleted_at"] is not None or not endpoint["active"]:
            found[delivery["id"]] = []
            continue
        secrets = [box.open(endpoint["secret"])]
        expires = endpoint["previous_expires_at"]
        if endpoint["previous_secret"] and expires and expires > now:
            secrets.append(box.open(endpoint["previous_secret"]))
        found[delivery["id"]] = secrets
    return found, {i for i, row in endpoints.items() if row["failing_since"] is not None}
