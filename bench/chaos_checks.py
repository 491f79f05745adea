"""What the fault run (bench/chaos.py) checks once everything has settled, from the database, the broker and
the webhook receiver, and the table it prints."""

import asyncio
import time
from collections import Counter, defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import aio_pika
import asyncpg  # type: ignore[import-untyped]
import httpx

from app.core.names import Names
from app.core.statuses import TERMINAL, JobStatus, can_move
from tests.local.private_services import PrivateServices

if TYPE_CHECKING:
    from bench.chaos import Submitted

NOTIFICATION = "chaos.notification"
EVENT_OF = {JobStatus.SUCCEEDED: "job.succeeded", JobStatus.DEAD_LETTERED: "job.dead_lettered"}
STATUSES = {str(status) for status in JobStatus}


@dataclass
class Findings:
    accepted: int = 0
    lost: list[str] = field(default_factory=list)
    duplicated: list[str] = field(default_factory=list)
    wrong_outcome: list[str] = field(default_factory=list)
    illegal_trails: list[str] = field(default_factory=list)
    deliveries_missing: list[str] = field(default_factory=list)
    delivery_rows_duplicated: list[str] = field(default_factory=list)
    notifications_missing: list[str] = field(default_factory=list)
    signatures_failed: int = 0
    outbox_left: int = 0
    jobs_dlq: tuple[int, int] = (0, 0)  # (messages in the broker's DLQ, dead-lettered jobs in the database)
    webhooks_dlq: tuple[int, int] = (0, 0)  # (messages, failed deliveries)
    drain_seconds: float | None = None  # from the last fault's restore to everything settled
    statuses: Counter[str] = field(default_factory=Counter)

    def passed(self) -> bool:
        problems: Iterable[Any] = (
            self.lost,
            self.duplicated,
            self.wrong_outcome,
            self.illegal_trails,
            self.deliveries_missing,
            self.delivery_rows_duplicated,
            self.notifications_missing,
            self.signatures_failed,
            self.outbox_left,
        )
        dlqs_agree = self.jobs_dlq[0] == self.jobs_dlq[1] and self.webhooks_dlq[0] == self.webhooks_dlq[1]
        return not any(problems) and dlqs_agree and self.drain_seconds is not None

    def headline(self) -> dict[str, Any]:
        return {
            "accepted": self.accepted,
            "lost": len(self.lost),
            "duplicated": len(self.duplicated),
            "deliveries_missing": len(self.deliveries_missing),
            "signatures_failed": self.signatures_failed,
            "passed": self.passed(),
        }

    def document(self, context: dict[str, Any]) -> str:
        faults = " · ".join(f"{kind} {n}" for kind, n in sorted(context["faults"].items()))
        drain = "did not settle" if self.drain_seconds is None else f"{self.drain_seconds:.1f} s"
        rows = [
            ("faults injected, by kind", faults),
            ("jobs accepted (answered 2xx)", str(self.accepted)),
            ("final statuses", " · ".join(f"{s} {n}" for s, n in sorted(self.statuses.items()))),
            ("jobs lost (accepted, then missing or not final)", _count(self.lost)),
            ("jobs duplicated (one key, two jobs; or succeeded twice)", _count(self.duplicated)),
            ("jobs that ended otherwise than their payload says", _count(self.wrong_outcome)),
            ("audit trails that are not a path of the transition table", _count(self.illegal_trails)),
            ("deliveries missing (no row, not succeeded, or never received)", _count(self.deliveries_missing)),
            ("delivery rows duplicated (one event, one endpoint, two rows)", _count(self.delivery_rows_duplicated)),
            ("notification calls never received", _count(self.notifications_missing)),
            ("signatures failed at the receiver", str(self.signatures_failed)),
            ("outbox rows left", str(self.outbox_left)),
            ("jobs DLQ: messages / dead-lettered jobs", f"{self.jobs_dlq[0]} / {self.jobs_dlq[1]}"),
            ("webhooks DLQ: messages / failed deliveries", f"{self.webhooks_dlq[0]} / {self.webhooks_dlq[1]}"),
            ("time to drain after the last fault", drain),
        ]
        verdict = "**passed**" if self.passed() else "**FAILED**"
        lines = [
            "# Reliability run",
            "",
            f"`make chaos` (bench/chaos.py): {context['jobs']} jobs at {context['rate']:g}/s, seed {context['seed']}; "
            f"the API, two job workers and a webhook worker as separate processes, on a PostgreSQL, Redis and "
            f"RabbitMQ of the run's own. Result: {verdict}.",
            "",
            "| figure | value |",
            "|---|---|",
            *(f"| {name} | {value} |" for name, value in rows),
            "",
        ]
        return "\n".join(lines)


def _count(items: list[str]) -> str:
    return str(len(items)) + (f" (e.g. {', '.join(items[:3])})" if items else "")


# -- settling ---------------------------------------------------------------------------------------------
async def check_run(
    services: PrivateServices,
    namespace: str,
    submitted: "list[Submitted]",
    receiver: str,
    restored: float,
    within: float,
    say: Callable[[str], None],
) -> Findings:
    dsn = f"postgresql://postgres@127.0.0.1:{services.postgres.port}/postgres"
    db = await asyncpg.connect(dsn)
    try:
        ids = [job_id for s in submitted for job_id in s.ids]
        names = Names(namespace)
        in_flight = [names.webhook_events_queue, names.webhook_deliver_queue]
        drained = await _settle(db, ids, receiver, (services.rabbit.url, in_flight), restored, within, say)
        findings = await _check(db, submitted, await _received(receiver))
        findings.drain_seconds = drained
        failed = int(await db.fetchval("SELECT count(*) FROM deliveries WHERE status = 'failed'"))
        wanted = (findings.statuses[JobStatus.DEAD_LETTERED], failed)
        findings.jobs_dlq, findings.webhooks_dlq = await _dlqs_settle(services.rabbit.url, Names(namespace), wanted)
        findings.outbox_left = int(await db.fetchval("SELECT count(*) FROM outbox"))
        return findings
    finally:
        await db.close()


async def _settle(
    db: Any,
    ids: list[str],
    receiver: str,
    broker: tuple[str, list[str]],
    restored: float,
    within: float,
    say: Callable[[str], None],
) -> float | None:
    """Wait until every job is final, the outbox is empty, no event or delivery waits in the broker's queues
    (`broker`: its URL and those queues), no delivery is pending and the receiver has one arrival per delivery,
    on two polls in a row; seconds from `restored`, or None when that did not happen within `within`.

    The queues matter: an event whose outbox row is gone and whose deliveries are not yet saved is in none of
    the tables, only in the webhook worker's queue (say while that worker restarts after a kill); the second
    poll covers an event the worker holds unacknowledged while it saves its deliveries."""
    deadline, last, quiet_since = time.monotonic() + within, "", None
    finals = [str(status) for status in TERMINAL]
    url, queues = broker
    while time.monotonic() < deadline:
        open_jobs = await db.fetchval(
            "SELECT count(*) FROM jobs WHERE id = ANY($1::text[]) AND status <> ALL($2::text[])", ids, finals
        )
        outbox = await db.fetchval("SELECT count(*) FROM outbox")
        pending = await db.fetchval("SELECT count(*) FROM deliveries WHERE status = 'pending'")
        delivered = await db.fetchval("SELECT count(*) FROM deliveries WHERE status = 'succeeded'")
        arrived = len({(r[2], r[3]) for r in (await _received(receiver))[0] if r[2] != NOTIFICATION})
        waiting = sum(await _depths(url, queues))
        state = (
            f"{open_jobs} jobs not final, {outbox} outbox rows, {waiting} webhook messages queued, "
            f"{pending} deliveries pending"
        )
        if state != last:
            say(state)
            last = state
        settled = open_jobs == outbox == waiting == pending == 0 and arrived >= delivered
        if settled and quiet_since is not None:
            return quiet_since - restored  # when it first looked settled
        quiet_since = time.monotonic() if settled else None
        await asyncio.sleep(1)
    return None


async def _dlqs_settle(
    url: str, names: Names, wanted: tuple[int, int], within: float = 30
) -> tuple[tuple[int, int], tuple[int, int]]:
    """(depth, wanted) of the jobs and the webhooks DLQ once the depths are what the database says, or as they
    stand after `within` seconds: the janitor removes a dead job's extra message copy on its next pass."""
    deadline = time.monotonic() + within
    while True:
        depths = await _depths(url, [names.jobs_dlq, names.webhooks_dlq])
        if tuple(depths) == wanted or time.monotonic() > deadline:
            return (depths[0], wanted[0]), (depths[1], wanted[1])
        await asyncio.sleep(1)


async def _received(receiver: str) -> tuple[list[list[Any]], int]:
    async with httpx.AsyncClient(timeout=30, trust_env=False) as http:
        seen = (await http.get(f"{receiver}/records")).json()
    return seen["records"], int(seen["rejected"])


async def _depths(url: str, queues: list[str]) -> list[int]:
    connection = await aio_pika.connect(url)
    try:
        channel = await connection.channel()
        depths = []
        for name in queues:
            queue = await channel.declare_queue(name, passive=True)
            depths.append(int(queue.declaration_result.message_count or 0))
        return depths
    finally:
        await connection.close()


# -- the checks -------------------------------------------------------------------------------------------
async def _check(db: Any, submitted: "list[Submitted]", received: tuple[list[list[Any]], int]) -> Findings:
    records, rejected = received
    findings = Findings(accepted=sum(1 for s in submitted if s.ids), signatures_failed=rejected)
    jobs = {r["id"]: r for r in await db.fetch("SELECT id, status, job_type, idempotency_key, runs FROM jobs")}
    trails: dict[str, list[str]] = defaultdict(list)
    for row in await db.fetch("SELECT job_id, event FROM job_events ORDER BY id"):
        trails[row["job_id"]].append(row["event"])
    by_key = Counter(job["idempotency_key"] for job in jobs.values())
    arrivals = {(r[2], r[3]) for r in records}
    for sub in submitted:
        if len(sub.ids) != 1 or by_key[sub.key] > 1:
            findings.duplicated.append(sub.key)
        for job_id in sub.ids:
            job = jobs.get(job_id)
            if job is None or job["status"] not in TERMINAL:
                findings.lost.append(job_id)
                continue
            findings.statuses[job["status"]] += 1
            if job["status"] != sub.expected_after(job["runs"]):
                trail = " > ".join(trails[job_id])
                findings.wrong_outcome.append(f"{job_id} ({sub.job_type}, {job['runs']} runs: {trail})")
            if trails[job_id].count(JobStatus.SUCCEEDED) > 1:
                findings.duplicated.append(job_id)
            if not legal(trails[job_id], job["status"]):
                findings.illegal_trails.append(f"{job_id}: {' > '.join(trails[job_id])}")
            if sub.job_type == "notification" and (NOTIFICATION, sub.key) not in arrivals:
                findings.notifications_missing.append(job_id)
    await _check_deliveries(db, jobs, arrivals, findings)
    return findings


def legal(trail: list[str], final: str) -> bool:
    """Whether the status changes of `trail` walk the transition table from `pending` to `final`."""
    if not trail or trail[0] != "created":
        return False
    state = JobStatus.PENDING
    for event in trail[1:]:
        if event not in STATUSES:
            continue  # replayed, delivery: entries that are not a status change
        if not can_move(state, JobStatus(event)):
            return False
        state = JobStatus(event)
    return state == final


async def _check_deliveries(db: Any, jobs: dict[str, Any], arrivals: set[tuple[str, str]], findings: Findings) -> None:
    rows = await db.fetch(
        "SELECT job_id, event_type, endpoint_id, count(*) AS n, bool_and(status = 'succeeded') AS ok "
        "FROM deliveries GROUP BY job_id, event_type, endpoint_id"
    )
    have = {(r["job_id"], r["event_type"]): r for r in rows}
    for row in rows:
        if row["n"] > 1:
            findings.delivery_rows_duplicated.append(f"{row['job_id']} {row['event_type']}")
    for job_id, job in jobs.items():
        event = EVENT_OF.get(JobStatus(job["status"]))
        if event is None:
            continue
        row = have.get((job_id, event))
        if row is None or not row["ok"] or (event, job_id) not in arrivals:
            findings.deliveries_missing.append(f"{job_id} {event}")
