"""The jobs search's WHERE clauses on PostgreSQL and SQLite alike: keys exact, a payload field's number or string."""

import uuid
from typing import Any

from sqlalchemy import insert, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.models.tables import JOBS
from app.services.job_search import JobSearch, conditions, payload_filters
from tests.support import make_job


async def found(engine: AsyncEngine, client_id: str, search: JobSearch) -> set[str]:
    query = select(JOBS.c.id).where(JOBS.c.client_id == client_id, *conditions(search))
    async with engine.connect() as conn:
        return {row.id for row in await conn.execute(query)}


def by_payload(**fields: str) -> JobSearch:
    return JobSearch(payload=payload_filters([(f"payload.{name}", value) for name, value in fields.items()]))


async def test_a_payload_field_matches_its_number_or_its_string_on_every_database(engine: AsyncEngine) -> None:
    client = "c_" + uuid.uuid4().hex[:12]
    payloads: list[Any] = [
        {"order_id": 123, "price": 1.5},
        {"order_id": "123"},
        {"order_id": 1234, "customer": {"id": "c-9"}},
        {"order_id": [123]},
        [123],
        "123",
        None,
    ]
    jobs = [make_job(client_id=client, payload=payload) for payload in payloads]
    async with engine.begin() as conn:
        await conn.execute(insert(JOBS), jobs)
    ids = [job["id"] for job in jobs]
    assert await found(engine, client, by_payload(order_id="123")) == {ids[0], ids[1]}
    assert await found(engine, client, by_payload(order_id="1234")) == {ids[2]}
    assert await found(engine, client, by_payload(price="1.5")) == {ids[0]}
    assert await found(engine, client, by_payload(**{"customer.id": "c-9"})) == {ids[2]}
    assert await found(engine, client, by_payload(order_id="123", price="1.5")) == {ids[0]}
    assert await found(engine, client, by_payload(missing="123")) == set()


async def test_q_matches_any_key_exactly_on_every_database(engine: AsyncEngine) -> None:
    client, tag = "c_" + uuid.uuid4().hex[:12], uuid.uuid4().hex[:8]
    keyed = make_job(
        client_id=client,
        request_id=f"r-{tag}",
        idempotency_key=f"i-{tag}",
        unique_key=f"u-{tag}",
        concurrency_key=f"k-{tag}",
    )
    plain = make_job(client_id=client)
    async with engine.begin() as conn:
        await conn.execute(insert(JOBS), [keyed, plain])
    for value in (keyed["id"], f"r-{tag}", f"i-{tag}", f"u-{tag}", f"k-{tag}"):
        assert await found(engine, client, JobSearch(q=value)) == {keyed["id"]}, value
    assert await found(engine, client, JobSearch(q=f"r-{tag[:-1]}")) == set()
    assert await found(engine, client, JobSearch(keys={"unique_key": f"u-{tag}", "request_id": "other"})) == set()
