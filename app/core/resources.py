"""The connections a process holds: database engine, Redis, broker, and the recent-logs sink that writes through
Redis. Opened at start-up, passed in."""

from dataclasses import dataclass

from redis.asyncio import Redis
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.broker import Broker
from app.core.config import Settings
from app.core.database import make_engine
from app.core.lane_shares import LaneShares
from app.core.names import Names
from app.core.recent_logs import RecentLogs
from app.core.redaction import Redactor
from app.core.redis_batch import RedisBatch
from app.core.secret_box import SecretBox
from app.core.topology import Topology, build_topology
from app.stores import Stores, open_stores


@dataclass
class Resources:
    settings: Settings
    topology: Topology
    engine: AsyncEngine
    redis: "Redis"
    broker: Broker
    logs: RecentLogs
    redis_batch: RedisBatch  # the hot paths' commands, many callers' in one pipeline
    stores: Stores  # the database's, chosen for it once here
    shares: LaneShares  # each lane's fair share of one client (docs/flow-control.md)

    @property
    def names(self) -> Names:
        return self.topology.names

    @classmethod
    async def open(cls, settings: Settings, role: str, broker_wait: float = 5) -> "Resources":
        """Create the clients; the broker connects in the background if it is not up yet."""
        topology = build_topology(settings)
        engine = make_engine(settings.database_url, settings.db_pool_size)
        redis = Redis.from_url(settings.redis_url, socket_timeout=2, socket_connect_timeout=2)
        broker = Broker(settings.rabbitmq_url, topology, settings.publish_timeout_seconds, name=f"{role}-publisher")
        await broker.start(wait=broker_wait)
        keys = (topology.names.recent_logs_key, topology.names.recent_info_logs_key)
        logs = RecentLogs(redis, keys, Redactor.for_settings(settings), settings.log_level)
        logs.start()
        box = SecretBox(settings.secret_encryption_key)
        stores = open_stores(engine, topology.names, settings.lock_ttl_seconds, box)
        shares = LaneShares(broker, topology.names, settings.fair_share)
        return cls(settings, topology, engine, redis, broker, logs, RedisBatch(redis), stores, shares)

    async def close(self) -> None:
        await self.shares.close()
        await self.broker.close()
        await self.logs.stop()
        await self.redis_batch.close()
        await self.redis.aclose()
        await self.stores.close()
        await self.engine.dispose()
