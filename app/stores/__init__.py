"""The stores: each aggregate's reads and writes behind one interface. The hot ones (jobs, outbox, deliveries)
have a PostgreSQL implementation (array statements, a hot batch one statement) and a portable one (SQLite, MSSQL
by rendering), chosen here once, when `Resources.open` sees the database URL; the others (schedules, webhook
endpoints, API keys, artifacts) have one SQL implementation for every database. No module outside `app/stores/`
asks which database it is on."""

from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.names import Names
from app.core.secret_box import SecretBox
from app.stores import postgres
from app.stores.api_keys import ApiKeyStore
from app.stores.api_keys.sql import SqlApiKeys
from app.stores.artifacts import ArtifactStore
from app.stores.artifacts.sql import SqlArtifacts
from app.stores.deliveries import DeliveryStore
from app.stores.deliveries.portable import PortableDeliveries
from app.stores.deliveries.postgres import PgDeliveries
from app.stores.endpoints import EndpointStore
from app.stores.endpoints.sql import SqlEndpoints
from app.stores.flow import FairStore, FlowStore
from app.stores.flow.fair import SqlFairness
from app.stores.flow.postgres import PgFairness, PgFlow
from app.stores.flow.sql import SqlFlow
from app.stores.job_types import JobTypeStore
from app.stores.job_types.sql import SqlJobTypes
from app.stores.jobs import JobStore
from app.stores.jobs.portable import PortableJobs
from app.stores.jobs.postgres import PgJobs
from app.stores.outbox import OutboxStore
from app.stores.outbox.portable import PortableOutbox
from app.stores.outbox.postgres import PgOutbox
from app.stores.postgres import PgConnections
from app.stores.schedules import ScheduleStore
from app.stores.schedules.sql import SqlSchedules


@dataclass(frozen=True)
class Stores:
    jobs: JobStore
    outbox: OutboxStore
    deliveries: DeliveryStore
    schedules: ScheduleStore
    endpoints: EndpointStore
    api_keys: ApiKeyStore
    artifacts: ArtifactStore
    job_types: JobTypeStore
    flow: FlowStore
    fair: FairStore
    connections: PgConnections | None = None  # PostgreSQL's kept autocommit connections

    async def close(self) -> None:
        """Give back what the stores keep checked out of the engine's pool (before the engine is disposed of)."""
        if self.connections is not None:
            await self.connections.close()


def open_stores(engine: AsyncEngine, names: Names, lease_seconds: float, box: SecretBox) -> Stores:
    """The stores for this engine's database; `lease_seconds` is how long a claimed job's lease lasts, `box` opens
    the secrets that sign deliveries."""
    # the same on every database:
    rows = SqlSchedules(engine), SqlEndpoints(engine), SqlApiKeys(engine), SqlArtifacts(engine), SqlJobTypes(engine)
    if postgres.applies(engine):
        connections = PgConnections(engine)
        pg_outbox = PgOutbox(engine)
        pg_jobs = PgJobs(engine, names, pg_outbox, lease_seconds, connections)
        pg_deliveries = PgDeliveries(engine, names, pg_outbox, pg_jobs, box, connections)
        flow: SqlFlow = PgFlow(engine, names, pg_outbox, lease_seconds, connections)
        pg_fair = PgFairness(engine, names, pg_outbox, connections)
        return Stores(pg_jobs, pg_outbox, pg_deliveries, *rows, flow, pg_fair, connections)
    outbox = PortableOutbox(engine)
    jobs = PortableJobs(engine, names, outbox, lease_seconds)
    flow = SqlFlow(engine, names, outbox, lease_seconds)
    fair = SqlFairness(engine, names, outbox)
    return Stores(jobs, outbox, PortableDeliveries(engine, names, outbox, jobs, box), *rows, flow, fair)
