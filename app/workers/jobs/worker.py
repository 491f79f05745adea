"""The job worker: prefetch-1 consumers per lane that claim, lock, run, retry or dead-letter, and ack last."""

import asyncio
import time
from dataclasses import dataclass, replace
from typing import Any

from loguru import logger

from app.core import metrics, tracing
from app.core.backoff import Tier, jittered_ms, tier_for_wait
from app.core.breaker import BreakerState
from app.core.broker import Broker, PublishError
from app.core.database import is_unreachable
from app.core.failpoints import Failpoints
from app.core.incoming import Message
from app.core.logging import worker_request_id
from app.core.messages import REQUEST_ID_HEADER, RETRY_COUNT_HEADER, JobMessage
from app.core.names import Lane, lane_of
from app.core.resources import Resources
from app.core.safe_http import safe_client
from app.core.secret_box import SecretBox
from app.core.statuses import JobStatus, WorkerKind, WorkerState
from app.handlers.base import JobContext
from app.handlers.errors import PermanentError
from app.models.rows import JobRow
from app.models.types import utcnow
from app.services import job_log
from app.services.artifacts import artifact_service
from app.services.fairness import fairness
from app.services.job_type_breakers import job_type_breakers
from app.services.outbox import Outbox
from app.stores.jobs import Outcome
from app.stores.outbox import Pending
from app.workers import unprocessable
from app.workers.consumers import ConsumerGroup, consumer_report
from app.workers.jobs.batches import JobBatches
from app.workers.jobs.breakers import BatchedBreakers
from app.workers.jobs.cpu_pool import CpuPool
from app.workers.jobs.holds import Holds
from app.workers.jobs.leases import Lease, Leases
from app.workers.jobs.locks import JobLocks, Lock
from app.workers.jobs.outcomes import cancelled, dead_lettered, give_up, retrying, succeeded, with_last_report
from app.workers.jobs.progress import Progress
from app.workers.jobs.replies import JobReplies
from app.workers.jobs.runner import run_attempt, run_sealed
from app.workers.jobs.tools import SharedTools
from app.workers.jobs.turns import Turns
from app.workers.reports import WorkerReport
from app.workers.retry_policy import DeadLetter, decide, error_of
from app.workers.tiers import int_header, to_tier
from app.workers.verdicts import Claimed, Defer, Drop, Raced, ToDeadLetters, Verdict

CLAIM_TRIES = 3


@dataclass
class JobWorker:
    """Consumes the job lanes: per lane a number of prefetch-1 consumers, critical ones reserved (rule 7)."""

    resources: Resources
    outbox: Outbox
    name: str = "job_worker"
    kind: WorkerKind = WorkerKind.JOB
    processed: int = 0

    def __post_init__(self) -> None:
        settings = self.resources.settings
        names = self.resources.names
        self.store = self.resources.stores.jobs
        self.locks = JobLocks(self.resources.redis, round(settings.lock_ttl_seconds * 1000))
        failpoints = Failpoints.parse(settings.failpoints)
        self.holds = Holds.of(self.resources, self.outbox)
        self.turns = Turns(fairness(self.resources, self.outbox))
        self.batches = JobBatches(
            self.store, self.locks, names, self.outbox, self.holds.admissions, settings.job_batch_size, failpoints
        )
        self.leases = Leases(self.store, self.locks, settings.lock_ttl_seconds / 3)
        self.progress = Progress(self.store, self.resources.broker, names, settings.job_batch_size)
        self._heartbeat: asyncio.Task[None] | None = None
        self.publisher: Broker = self.resources.broker
        self.replies = JobReplies(self.publisher)
        self.box = SecretBox(settings.secret_encryption_key)  # opens a payload's sealed credentials
        self.breakers = BatchedBreakers(job_type_breakers(self.resources))
        self.tools = SharedTools(
            CpuPool(settings.cpu_pool_size),
            artifact_service(self.resources),
            safe_client(
                settings.webhook_allow_private_networks,
                max_connections=settings.webhook_max_connections,
                keepalive_seconds=settings.webhook_keepalive_seconds,
                dns_default_seconds=settings.webhook_dns_cache_seconds,
            ),
        )
        plan = {self.resources.names.lane_queue(lane): count for lane, count in self.counts().items()}
        self.group = ConsumerGroup(self.resources, self.name, plan, self._handle, self._give_up)

    def counts(self) -> dict[Lane, int]:
        settings = self.resources.settings
        return {
            Lane.CRITICAL: settings.job_consumers_critical,
            Lane.DEFAULT: settings.job_consumers_default,
            Lane.BULK: settings.job_consumers_bulk,
        }

    @property
    def state(self) -> WorkerState:
        return self.group.state

    def report(self) -> WorkerReport:
        return consumer_report(self.name, self.kind, self.state, self.consumer_groups)

    @property
    def consumer_groups(self) -> tuple[ConsumerGroup, ...]:
        return (self.group,)

    async def start(self) -> None:
        self.batches.reopen()
        self.progress.reopen()
        self._heartbeat = asyncio.create_task(self.leases.run(), name=f"{self.name}-heartbeat")
        await self.holds.start()  # the paused types read before the first message
        self.turns.start()
        await self.group.start()

    async def stop(self, grace: float | None = None) -> None:
        """Stop taking messages; in-flight jobs get the grace period, the rest is redelivered (rule 9)."""
        await self.group.stop(self.resources.settings.shutdown_grace_seconds if grace is None else grace)
        await self.replies.close()
        await self.progress.close()
        await self.batches.close()
        await self.holds.stop()
        await self.turns.stop()
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            await asyncio.gather(self._heartbeat, return_exceptions=True)
        self.tools.pool.close()
        await self.tools.http.aclose()
        await self.breakers.flush()

    async def _handle(self, message: Message) -> None:
        try:
            job_message = JobMessage.from_bytes(message.body)
        except (ValueError, TypeError):
            logger.error("malformed job message {}; rejecting it into the DLQ", message.message_id)
            await message.reject(requeue=False)
            return
        worker_request_id.set(job_message.request_id or job_message.job_id)
        attributes = {"job.id": job_message.job_id, "job.type": job_message.job_type}
        with tracing.consuming("job.process", message.headers, **attributes):
            await self._process(message, job_message)

    async def _process(self, message: Message, job_message: JobMessage) -> None:
        """The message's job held, deferred, or claimed and run (in the span of `_handle`, when tracing is on)."""
        if await self.holds.held(job_message):
            await message.ack()  # it waits in the database (paused, throttled): its release sends it again
            return
        circuit = await self.breakers.check(job_message.job_type)
        if circuit.state is BreakerState.OPEN or (circuit.state is BreakerState.HALF_OPEN and not circuit.probe):
            # The job type's circuit is open: no claim, no attempt; the job waits in a delay tier.
            wait = circuit.retry_after or self.breakers.cooldown_seconds / 10
            await self._defer(message, job_message, wait)
            return
        with tracing.span("job.claim"):
            keyed = job_message.keyed and not job_message.admitted(time.time())
            verdict, lock = await self._claim(job_message.job_id, keyed)
        self.turns.claimed(job_message)  # it left its lane, whatever the claim decided
        if circuit.probe and not isinstance(verdict, Claimed):
            await self.breakers.release_probe(job_message.job_type)
        match verdict:
            case Drop(why):
                logger.info("dropping message for job {}: {}", job_message.job_id, why)
                await message.ack()
            case ToDeadLetters(_, buried):
                if buried is not None:  # its retry budget was spent before this claim: dead-lettered just now
                    metrics.count_outcomes([(job_message.job_type, JobStatus.DEAD_LETTERED)])
                    job_log.finished(buried, JobStatus.DEAD_LETTERED, buried["finished_at"])
                await message.reject(requeue=False)
            case Defer(seconds):
                await self._defer(message, job_message, seconds)
            case Claimed(job):
                await self._run(message, job, lock, circuit.probe)

    async def _give_up(self, message: Message, exc: Exception) -> None:
        """The service failed to process this job's message three times: dead-letter the job as `unprocessable`,
        its error the one that stopped it, and reject the message into the DLQ."""
        job_message = JobMessage.from_bytes(message.body)  # it parsed each time: a malformed one never gets here
        buried = await give_up(self.store, job_message.job_id, unprocessable.error_of(exc))
        if buried is not None:
            job, staged = buried
            metrics.count_outcomes([(job["job_type"], JobStatus.DEAD_LETTERED)])
            job_log.finished(job, JobStatus.DEAD_LETTERED, job["finished_at"])
            self.outbox.publish_soon([staged])
        await message.reject(requeue=False)

    async def _claim(self, job_id: str, keyed: bool) -> tuple[Verdict, Lock]:
        """Claim through the batch (`keyed`: admitted first); a claim that lost a race decides again, a few times,
        then waits a lease."""
        for _ in range(CLAIM_TRIES):
            verdict, lock = await self.batches.claim(job_id, keyed)
            if not isinstance(verdict, Raced):
                return verdict, lock
        return Defer(self.store.lease_seconds), lock

    def _start(self, job: JobRow, lock: Lock) -> "asyncio.Task[Any]":
        """The attempt, running; its lease is renewed while it runs."""
        timeout = job["timeout_seconds"] or self.resources.settings.job_timeout_seconds
        tools = self.tools.bind(job["client_id"])
        sink = self.progress.sink(job)
        ctx = JobContext(job["id"], job["job_type"], job["attempts"], job["runs"], job["request_id"], tools)
        ctx = replace(ctx, progress_sink=sink)
        attempt = asyncio.create_task(self._attempt(ctx, job, timeout))
        self.leases.hold(Lease(job, lock, attempt))
        return attempt

    async def _attempt(self, ctx: JobContext, job: JobRow, limit_seconds: float) -> Any:
        """One run of the handler, given its dependencies' results first when it has any (one read)."""
        if job.get("depends_on"):
            ctx = replace(ctx, dependencies=await self.store.dependency_results(job["depends_on"] or []))
        sealed = job.get("sealed")
        if sealed is None:
            return await run_attempt(ctx, job["payload"], limit_seconds)
        return await run_sealed(ctx, job, sealed, self.box, limit_seconds)

    async def _run(self, message: Message, job: JobRow, lock: Lock, probe: bool) -> None:
        attributes = {"job.id": job["id"], "job.type": job["job_type"], "job.attempt": job["attempts"]}
        with tracing.span("job.run", **attributes):
            await self._running(message, job, lock, probe)

    async def _running(self, message: Message, job: JobRow, lock: Lock, probe: bool) -> None:
        attempt = self._start(job, lock)
        ran = metrics.duration(job["job_type"])
        started = time.perf_counter()
        try:
            result = await attempt
        except asyncio.CancelledError:
            stopped = self.leases.stopping(job["id"])
            job = self._ended(job)
            current = asyncio.current_task()
            if (current is None or not current.cancelling()) and stopped:
                if probe:  # stopped, it says nothing of the job type's health: the next probe may go
                    await self.breakers.release_probe(job["job_type"])
                await self._cancelled(message, job, lock)
                return
            await self.locks.release([lock])
            if current is not None and current.cancelling():
                attempt.cancel()
                raise  # shutting down: unacked, so the broker redelivers it
            logger.warning("job {} belongs to a newer run now; dropping this copy", job["id"])
            await message.ack()
            return
        except Exception as exc:
            ran.observe(time.perf_counter() - started)
            stopped = self.leases.stopping(job["id"])
            job = self._ended(job)
            await self._judge(job["job_type"], exc, probe)
            await self._failed(message, job, lock, exc, stopped)
            return
        ran.observe(time.perf_counter() - started)
        job = self._ended(job)
        await self._judge(job["job_type"], None, probe)
        await self._succeeded(message, job, lock, result)

    async def _finish(self, outcome: Outcome, lock: Lock) -> Pending | None:
        """Record the run's outcome through the batch (in a span of its own: its event continues the trace there)."""
        tracing.annotate(**{"job.outcome": str(outcome.to)})
        with tracing.span("job.finish"):
            return await self.batches.finish(outcome, lock)

    def _ended(self, job: JobRow) -> JobRow:
        """The run is over: its lease no longer renewed; the job with its last progress report, for its outcome."""
        self.leases.drop(job["id"])
        return with_last_report(job, self.progress.ended(job))

    async def _succeeded(self, message: Message, job: JobRow, lock: Lock, result: Any) -> None:
        """Record the result (a result the database refuses fails the job for good), then ack."""
        outcome = succeeded(job, result)
        try:
            staged = await self._finish(outcome, lock)
        except Exception as exc:
            if is_unreachable(exc):
                raise  # the database is down: unacked, the message comes back and the job runs again
            logger.error("job {}: its result could not be stored: {}", job["id"], exc)
            await self._failed(message, job, lock, PermanentError(f"the result could not be stored: {exc}"))
            return
        if staged is not None:
            self.replies.succeeded(message, job["id"])
            job_log.finished(job, outcome.to, outcome.values["finished_at"])
        self.processed += 1
        await self._settle(message, staged, ack=True)

    async def _cancelled(self, message: Message, job: JobRow, lock: Lock) -> None:
        """The handler was stopped for the job's cancel: record it cancelled, fenced like any outcome (one recorded
        first, or a newer run's, stands), then ack: its message is never run again."""
        outcome = cancelled(job)
        staged = await self._finish(outcome, lock)
        if staged is not None:
            self.replies.send(message, job["id"], JobStatus.CANCELLED)
            job_log.finished(job, outcome.to, outcome.values["finished_at"])
        await message.ack()

    def stop_run(self, job_id: str) -> bool:
        """Stop the handler of `job_id` if this worker runs it (its cancel was asked for): whether it does."""
        return self.leases.stop(job_id)

    async def _judge(self, job_type: str, exc: Exception | None, probe: bool) -> None:
        """Feed the job type's breaker: successes and transient failures count; a client's bad input does not."""
        if isinstance(exc, PermanentError):
            if probe:
                await self.breakers.release_probe(job_type)
            return
        await self.breakers.record(job_type, ok=exc is None, probe=probe)

    async def _failed(self, message: Message, job: JobRow, lock: Lock, exc: Exception, stopped: bool = False) -> None:
        if stopped:  # it failed as it was stopped for its cancel: cancelled, not failed
            await self._cancelled(message, job, lock)
            return
        error = error_of(exc)
        tiers = self.resources.topology.job_tiers
        plan = decide(exc, job["attempts"], job["max_retries"], tiers, utcnow())
        if isinstance(plan, DeadLetter):
            logger.warning("job {} dead-lettered ({}): {}", job["id"], plan.reason, error["message"])
            outcome = dead_lettered(job, error, plan.reason)
            staged = await self._finish(outcome, lock)
            if staged is not None:
                self.replies.dead_lettered(message, job["id"])
                job_log.finished(job, outcome.to, outcome.values["finished_at"])
            await self._settle(message, staged, ack=False)
            return
        attempt, delay = job["attempts"], round((plan.next_attempt_at - utcnow()).total_seconds(), 1)
        logger.info("job {} attempt {} failed, retrying in ~{}s: {}", job["id"], attempt, delay, error["message"])
        staged = await self._finish(retrying(job, error, plan.next_attempt_at), lock)
        if staged is None:  # refused: a newer run owns the job, or its cancel was asked for (never retried then)
            await self._cancelled(message, job, lock)
            return
        job_message = JobMessage.from_row(job)
        await self._to_tier(message, job_message, plan.tier, plan.expiration_ms, job["attempts"])
        await self._settle(message, staged, ack=True)

    async def _settle(self, message: Message, staged: Pending | None, ack: bool) -> None:
        """After the commit (its events already on their way): ack, or reject into the DLQ. Nothing recorded means
        a newer run owns the job (we were fenced out): that run settles it, so ack ours."""
        if ack or staged is None:
            await message.ack()
        else:
            await message.reject(requeue=False)

    async def _defer(self, message: Message, job_message: JobMessage, seconds: float) -> None:
        tier = tier_for_wait(self.resources.topology.job_tiers, seconds)
        retry_count = int_header(message, RETRY_COUNT_HEADER)
        await self._to_tier(message, job_message, tier, jittered_ms(tier), retry_count)
        await message.ack()

    async def _to_tier(
        self, message: Message, job_message: JobMessage, tier: Tier, expiration_ms: int, retry_count: int
    ) -> None:
        """Publish the job's message into its lane's delay tier; raising leaves the original unacked."""
        names = self.resources.names
        queue = names.job_tier_queue(lane_of(job_message.priority), tier)
        headers: dict[str, Any] = {RETRY_COUNT_HEADER: retry_count}
        if job_message.request_id:
            headers[REQUEST_ID_HEADER] = job_message.request_id
        # A waiting submitter's reply address rides along: the run after the delay answers it.
        exchange = names.jobs_retry_exchange
        try:
            await to_tier(self.publisher, exchange, queue, message, headers, expiration_ms, job_message.job_id)
        except PublishError:
            logger.warning("could not move job {} to its delay tier; leaving it for redelivery", job_message.job_id)
            raise
