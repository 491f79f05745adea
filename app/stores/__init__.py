"""The stores: each aggregate's reads and writes behind one interface, with a PostgreSQL implementation (array
statements, a hot batch one statement) and a portable one (SQLite, MSSQL by rendering), chosen here once, when
`Resources.open` sees the database URL. No module outside `app/stores/` asks which database it is on."""

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.names import Names
from app.core.secret_box import SecretBox
from app.stores import postgres
from app.stores.deliveries import DeliveryStore
from app.stores.deliveries.portable import PortableDeliveries
from app.stores.deliveries.postgres import PgDeliveries
from app.stores.job_types import JobTypeStore
from app.stores.job_types.sql import SqlJobTypes
from app.stores.jobs import JobStore
from app.stores.jobs.portable import PortableJobs
from app.stores.jobs.postgres import PgJobs
from app.stores.outbox import OutboxStore
from app.stores.outbox.portable import PortableOutbox
from app.stores.outbox.postgres import PgOutbox
from app.stores.postgres import PgConnections


@dataclass(frozen=True)
class Stores:
    jobs: JobStore
    outbox: OutboxStore
    deliveries: DeliveryStore
    job_types: JobTypeStore  # the same on every database
    connections: PgConnections | None = None  # PostgreSQL's kept autocommit connections

    async def close(self) -> None:
        """Give back what the stores keep checked out of the engine's pool (before the engine is disposed of)."""
        if self.connections is not None:
            await self.connections.close()


def open_stores(engine: AsyncEngine, names: Names, lease_seconds: float, box: SecretBox) -> Stores:
    """The stores for this engine's database; `lease_seconds` is how long a claimed job's lease lasts, `box` opens
    the secrets that sign deliveries."""
    if postgres.applies(engine):
        connections = PgConnections(engine)
        pg_outbox = PgOutbox(engine)
        pg_jobs = PgJobs(engine, names, pg_outbox, lease_seconds, connections)
        pg_deliveries = PgDeliveries(engine, names, pg_outbox, pg_jobs, box, connections)
        return Stores(pg_jobs, pg_outbox, pg_deliveries, SqlJobTypes(engine), connections)
    outbox = PortableOutbox(engine)
    jobs = PortableJobs(engine, names, outbox, lease_seconds)
    return Stores(jobs, outbox, PortableDeliveries(engine, names, outbox, jobs, box), SqlJobTypes(engine))
