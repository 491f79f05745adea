"""What one job of a drain costs each service, read from the services' own counters around the drain.

- RabbitMQ: the node's global counters (`rabbit_global_counters`, read with `rabbitmqctl eval`; no management
  plugin is needed): messages received from publishers, delivered to consumers, acknowledged.
- PostgreSQL: `pg_stat_database` of the bench's database (transactions committed; rows inserted, updated and
  deleted), `pg_stat_user_tables` (rows written per table) and `pg_stat_wal` (the server's WAL written: the bench is
  alone on it while it measures). Statements are counted by `pg_stat_statements`
  only where the server loads it (`shared_preload_libraries`, a setting of the server's start): elsewhere the
  table says so rather than counting on the client's side.
- Redis: INFO's `total_commands_processed`, less the bench's own INFO calls.

The counters' window opens before the worker starts and closes after it has stopped, so that every job of the
drain is in it (a backend's statistics reach PostgreSQL's views when it ends or within a second; the window waits
for them to settle); the worker's own start and stop are in it too, spread over the drain's jobs. CPU has its own,
narrower window (the drain, without the worker's start), as for the job worker's CPU per job.
"""

import asyncio
import contextlib
import re
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass

import asyncpg
from redis.asyncio import Redis

from bench.env import REDIS_URL
from bench.report import Row, num, ratio
from bench.stats import median

BROKER = ("published", "delivered", "acknowledged")
_GLOBAL = {  # our names for the node's counters, summed over protocols and queue types
    "published": "messages_received_total",
    "delivered": "messages_delivered_total",
    "acknowledged": "messages_acknowledged_total",
}
_EVAL = (
    "M = rabbit_global_counters:overview(), "
    "F = fun(K) -> maps:fold(fun(_, V, A) -> A + maps:get(K, V, 0) end, 0, M) end, "
    'lists:foreach(fun(K) -> io:format("~s ~b~n", [K, F(K)]) end, [{}]).'
).replace("{}", ", ".join(_GLOBAL.values()))
SETTLE_READS = 20  # reads of PostgreSQL's views, 0.25 s apart, until two agree
Counts = dict[str, float]


def _broker() -> Counts | None:
    try:
        out = subprocess.run(["rabbitmqctl", "eval", _EVAL], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.TimeoutExpired):
        return None
    read = dict(re.findall(r"^(\w+) (\d+)$", out.stdout, re.MULTILINE))
    if out.returncode != 0 or not all(name in read for name in _GLOBAL.values()):
        return None
    return {ours: float(read[theirs]) for ours, theirs in _GLOBAL.items()}


async def _database(dsn: str | None) -> Counts:
    """The database's counters, once two reads 0.25 s apart agree on the rows written (a backend's statistics
    arrive late). `own transactions`: this read's own, which reach the counters after it (its connection's end)."""
    if dsn is None:
        return {}
    conn = await asyncpg.connect(dsn)
    try:
        statements = "pg_stat_statements" in str(await conn.fetchval("SHOW shared_preload_libraries"))
        if statements:
            await conn.execute("CREATE EXTENSION IF NOT EXISTS pg_stat_statements")
        own, last = 1 + statements, None
        for _ in range(SETTLE_READS):
            now = await _database_once(conn, statements)
            own += 4 + statements
            if last is not None and now["rows written"] == last["rows written"]:
                break
            last = now
            await asyncio.sleep(0.25)
        return now | {"own transactions": float(own)}
    finally:
        await conn.close()


async def _database_once(conn: asyncpg.Connection, statements: bool) -> Counts:
    db = await conn.fetchrow(
        "SELECT xact_commit, tup_inserted + tup_updated + tup_deleted AS written "
        "FROM pg_stat_database WHERE datname = current_database()"
    )
    read: Counts = {"transactions": float(db["xact_commit"]), "rows written": float(db["written"])}
    if await conn.fetchval("SELECT to_regclass('pg_stat_wal') IS NOT NULL"):  # PostgreSQL 14 and later
        read["WAL kB"] = float(await conn.fetchval("SELECT wal_bytes FROM pg_stat_wal")) / 1024
    tables = await conn.fetch("SELECT relname, n_tup_ins + n_tup_upd + n_tup_del AS written FROM pg_stat_user_tables")
    read |= {f"rows: {row['relname']}": float(row["written"]) for row in tables}
    if statements:
        query = "SELECT sum(calls) FROM pg_stat_statements WHERE dbid = (SELECT oid FROM pg_database "
        read["statements"] = float(await conn.fetchval(query + "WHERE datname = current_database())") or 0)
    return read


async def _redis() -> float:
    client = Redis.from_url(REDIS_URL)
    try:
        return float((await client.info("stats"))["total_commands_processed"])
    finally:
        await client.aclose()


async def read(dsn: str | None) -> Counts:
    """Every counter now (`dsn`: the database whose counters count, None for a peer without one)."""
    broker = await asyncio.to_thread(_broker)
    return {**(broker or {}), **await _database(dsn), "redis commands": await _redis()}


@dataclass(frozen=True)
class Cost:
    """Per job: each counter's change over the window, and CPU ms by process and service."""

    per_job: Counts

    @classmethod
    def of(cls, before: Counts, after: Counts, jobs: int, cpu_seconds: dict[str, float], cpu_jobs: int) -> "Cost":
        changed = {name: after[name] - before.get(name, 0.0) for name in after if name != "own transactions"}
        changed["redis commands"] -= 1  # the opening read's INFO, counted once it had answered
        if "transactions" in changed:  # the opening read's, which reached the counters when its connection ended
            changed["transactions"] -= before.get("own transactions", 0.0)
        per_job = {name: value / max(jobs, 1) for name, value in changed.items()}
        per_job |= {f"cpu: {name}": seconds * 1000 / max(cpu_jobs, 1) for name, seconds in cpu_seconds.items()}
        return cls(per_job)

    def get(self, name: str) -> float | None:
        return self.per_job.get(name)

    def tables(self, least: float = 0.05) -> dict[str, float]:
        """Rows written per job by table, the most first, those under `least` left out."""
        rows = {name.removeprefix("rows: "): v for name, v in self.per_job.items() if name.startswith("rows: ")}
        return dict(sorted(((t, v) for t, v in rows.items() if v >= least), key=lambda item: -item[1]))


@dataclass
class Window:
    """The counters' window of one drain: `open()` before its worker starts, `close()` after it stopped."""

    dsn: str | None
    before: Counts | None = None

    async def open(self) -> None:
        with contextlib.suppress(Exception):  # a machine without rabbitmqctl, say: the table shows none
            self.before = await read(self.dsn)

    async def close(self, jobs: int, cpu_seconds: dict[str, float], cpu_jobs: int) -> Cost | None:
        if self.before is None:
            return None
        try:
            after = await read(self.dsn)
        except Exception:
            return None
        return Cost.of(self.before, after, jobs, cpu_seconds, cpu_jobs)


def shown(cost: Cost | None, names: tuple[str, ...], digits: int = 2) -> str:
    """Some figures of a cost, ' / '-joined, `n/a` for any not counted."""
    if cost is None:
        return "n/a"
    return " / ".join("n/a" if cost.get(name) is None else f"{cost.get(name):.{digits}f}" for name in names)


def median_of(costs: Sequence[Cost | None]) -> Cost | None:
    """Each figure's median over the rounds that counted it; None when none did."""
    counted = [cost for cost in costs if cost is not None]
    if not counted:
        return None
    names = dict.fromkeys(name for cost in counted for name in cost.per_job)
    medians = {name: median([c.per_job[name] for c in counted if name in c.per_job]) for name in names}
    return Cost({name: value for name, value in medians.items() if value is not None})


CPU = ("cpu: worker", "cpu: PostgreSQL", "cpu: RabbitMQ", "cpu: Redis", "cpu: machine")


def rows(ours: Cost | None, dramatiq: Cost | None, consumers: int, why_none: str = "") -> list[Row]:
    """The cost table: per job of our drain at C = `consumers`, beside per task of Dramatiq's."""
    at = f"per job, drain at C = {consumers}"
    absent = f"Dramatiq: {why_none or 'not counted'}"

    def theirs(names: tuple[str, ...], digits: int = 2) -> str:
        return f"Dramatiq {shown(dramatiq, names, digits)}" if dramatiq else absent

    broker = tuple(sum(cost.get(name) or 0.0 for name in BROKER) if cost else None for cost in (ours, dramatiq))
    statements = "statements" if ours is not None and ours.get("statements") is not None else None
    database = ("transactions", "rows written", "WAL kB", *([statements] if statements else []))
    machine = tuple(cost.get("cpu: machine") if cost else None for cost in (ours, dramatiq))
    cheaper = None if None in machine else machine[0] <= machine[1]  # type: ignore[operator]
    tables = " · ".join(f"{name} {value:.2f}" for name, value in (ours.tables() if ours else {}).items())
    return [
        Row(
            "cost",
            f"{at}: RabbitMQ messages published / delivered / acknowledged (the node's global counters)",
            shown(ours, BROKER),
            theirs(BROKER),
            f"{num(ratio(broker[0], broker[1]), 2)} x Dramatiq (all three)" if dramatiq else "—",
        ),
        Row(
            "cost",
            f"{at}: PostgreSQL transactions / rows written / WAL kB{' / statements' if statements else ''} "
            "(pg_stat_database, pg_stat_wal"
            + (", pg_stat_statements)" if statements else "; statements need pg_stat_statements, not loaded here)"),
            shown(ours, database),
            "Dramatiq: no database",
        ),
        Row("cost", f"{at}: rows written by table (pg_stat_user_tables)", tables or "n/a"),
        Row(
            "cost",
            f"{at}: Redis commands (INFO; Dramatiq's are the bench's own, each task recording itself)",
            shown(ours, ("redis commands",)),
            theirs(("redis commands",)),
        ),
        Row(
            "cost",
            f"{at}: CPU ms of the worker / PostgreSQL / RabbitMQ / Redis / the machine",
            shown(ours, CPU, 3),
            theirs(CPU, 3),
            f"{num(ratio(machine[0], machine[1]), 2)} x Dramatiq (machine)" if dramatiq else "—",
            "machine ≤ Dramatiq's",
            cheaper,
        ),
    ]
