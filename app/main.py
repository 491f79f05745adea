"""The composition root: the FastAPI app, its lifespan, and the workers it may embed."""

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from functools import partial

from asgi_correlation_id import CorrelationIdMiddleware
from fastapi import FastAPI
from loguru import logger

from app.api import docs_pages, errors, http_metrics
from app.api.body_deadline import BodyDeadline
from app.api.openapi import build_openapi, operation_id
from app.api.request_body import RequestBody
from app.api.routes import (
    api_keys,
    circuits,
    deliveries,
    dlq,
    event_types,
    flow,
    health,
    job_types,
    jobs,
    live,
    logs,
    overview,
    redrives,
    schedules,
    summary,
    webhooks,
    workers,
    workflows,
)
from app.api.state import ApiState
from app.api.submit_path import SubmitPath
from app.core import metrics, tracing
from app.core.collector import settle
from app.core.config import Settings, get_settings
from app.core.database import server_warning
from app.core.failpoints import Failpoints
from app.core.logging import configure_logging
from app.core.parent import stay_with_parent
from app.core.replies import ReplyInbox
from app.core.resources import Resources
from app.core.secret_box import SecretBox
from app.core.statuses import WorkerState
from app.dashboard import routes as dashboard
from app.runtime import Hooks, Runtime, add_background, add_gauges, add_steering, nothing
from app.services.api_keys import ApiKeyService
from app.services.artifacts import artifact_service
from app.services.deliveries import DeliveryService
from app.services.dlq import DlqService
from app.services.fairness import fairness
from app.services.idempotency import IdempotencyCache
from app.services.job_type_breakers import job_type_breakers
from app.services.job_types import JobTypeService
from app.services.jobs import JobService
from app.services.live import EventFeed, Hub
from app.services.outbox import Outbox
from app.services.rate_limit import RateLimiter
from app.services.revoked_streams import RevokedStreams
from app.services.run_stops import RunStops
from app.services.streams import LiveStreams
from app.services.webhooks import WebhookService
from app.services.worker_directory import WorkerDirectory
from app.workers.jobs.worker import JobWorker
from app.workers.webhooks.worker import WebhookWorker

REQUEST_ID_MAX = 128
PARENT_GONE_MARGIN_SECONDS = 5.0  # past the shutdown grace, for the lifespan's own stop


def valid_request_id(value: str) -> bool:
    """A client's `X-Request-ID` is kept when it is 1-128 printable ASCII characters; any other gets a fresh one,
    so the id a client reads back is the one every log line and webhook delivery carries, byte for byte."""
    return 0 < len(value) <= REQUEST_ID_MAX and value.isascii() and value.isprintable()


@asynccontextmanager
async def lifespan(app: FastAPI) -> AsyncIterator[None]:
    settings: Settings = app.state.settings
    metrics.forget_dead_processes()
    try:
        async with _run(app, settings):
            yield
    finally:
        metrics.leave()


@asynccontextmanager
async def _run(app: FastAPI, settings: Settings) -> AsyncIterator[None]:
    async with Runtime.opened(settings, role="api") as runtime:
        add_steering(runtime)
        add_background(runtime)
        hub = Hub(settings.live_buffer_events)
        feed = EventFeed(runtime.resources.broker, runtime.resources.names, hub)
        inbox = ReplyInbox(runtime.resources.broker)
        runtime.add(Hooks("live_feed", feed.start, feed.stop))
        runtime.add(Hooks("reply_inbox", inbox.start, inbox.close))
        state = api_state(runtime.resources, runtime.outbox, feed, inbox, runtime.held)
        runtime.add(Hooks("job_service", nothing, state.jobs.close))
        revoked = RevokedStreams(state.keys, hub)
        runtime.add(Hooks("revoked_streams", revoked.start, revoked.stop))
        embedded = embedded_workers(runtime.resources, runtime.outbox) if settings.embedded_workers else {}
        add_gauges(runtime, embedded)
        for name, worker in embedded.items():
            runtime.add(worker)
            state.workers[name] = partial(getattr, worker, "state")
        app.state.api, app.state.workers, app.state.runtime = state, embedded, runtime
        await runtime.start()
        if warning := await server_warning(runtime.resources.engine):
            logger.warning(warning)
        logger.info("API ready on http://{}:{} (namespace {})", settings.host, settings.port, settings.namespace)
        yield


def api_state(resources: Resources, outbox: Outbox, feed: EventFeed, inbox: ReplyInbox, held: set[str]) -> ApiState:
    """The services the routes reach; a worker this process does not run reads as disabled in /ready."""
    settings, names = resources.settings, resources.names
    box = SecretBox(settings.secret_encryption_key)
    deliveries = DeliveryService(resources.engine, resources.stores.deliveries, outbox)
    idempotency = IdempotencyCache(resources.redis, names, settings.idempotency_ttl_seconds)
    failpoints = Failpoints.parse(settings.failpoints)
    stops = RunStops(resources.broker, names)
    return ApiState(
        resources=resources,
        jobs=JobService(
            resources.engine,
            resources.stores.jobs,
            outbox,
            names,
            idempotency,
            failpoints,
            box,
            fairness(resources, outbox),
        ),
        keys=ApiKeyService(
            resources.stores.api_keys, settings.admin_api_key, resources.redis_batch, names.api_keys_generation_key
        ),
        webhooks=WebhookService(
            resources.engine,
            resources.stores.endpoints,
            outbox,
            names,
            box,
            settings.webhook_allow_private_networks,
            resources.stores.deliveries,
            deliveries,
        ),
        deliveries=deliveries,
        dlq=DlqService(resources.engine, resources.stores.jobs, outbox, names, stops, failpoints, box),
        artifacts=artifact_service(resources),
        limiter=RateLimiter(resources.redis_batch, names, settings.rate_limit_per_minute),
        breakers=job_type_breakers(resources),
        job_types=JobTypeService(resources.stores.job_types, resources.stores.jobs, outbox),
        live=LiveStreams(resources.engine, names, feed.hub, feed),
        replies=inbox,
        workers={"job_worker": lambda: WorkerState.DISABLED, "webhook_worker": lambda: WorkerState.DISABLED},
        held=held,
        directory=WorkerDirectory(resources.redis, names, settings.worker_heartbeat_seconds),
    )


def embedded_workers(resources: Resources, outbox: Outbox) -> dict[str, JobWorker | WebhookWorker]:
    """The workers `make run` runs inside the API process (seed 003)."""
    return {"job_worker": JobWorker(resources, outbox), "webhook_worker": WebhookWorker(resources, outbox)}


def app_from_environment() -> FastAPI:
    """The app of one of several API processes (`python -m app api --processes N`): settings and logging from
    the environment, as the parent read them. It ends when the parent does, even one killed with SIGKILL."""
    settings = get_settings()
    stay_with_parent(settings.shutdown_grace_seconds + PARENT_GONE_MARGIN_SECONDS)
    configure_logging(settings)
    app = create_app(settings)
    settle()
    return app


ROUTES = (
    health,
    api_keys,
    jobs,
    flow,
    schedules,
    live,
    webhooks,
    deliveries,
    event_types,
    redrives,  # before dlq: its paths are under /api/v1/dlq
    dlq,
    circuits,
    job_types,
    logs,
    workers,
    overview,
    summary,
    workflows,
)


def create_app(settings: Settings | None = None) -> FastAPI:
    """The API application; nothing connects until its lifespan starts."""
    app = FastAPI(
        title="Task queue",
        version="1.0.0",
        description="Submit jobs over REST; workers run them; results reach you as signed webhooks.",
        lifespan=lifespan,
        generate_unique_id_function=operation_id,
        docs_url=None,  # served with their assets by app/api/docs_pages.py
        redoc_url=None,
        strict_content_type=False,  # a body without Content-Type is JSON, on every route (app/api/request_body.py)
    )
    app.state.settings = settings or get_settings()
    app.add_middleware(SubmitPath, api=app)  # added first, so the innermost: every middleware below applies to it
    app.add_middleware(RequestBody, settings=app.state.settings)  # inside the request id and the body deadline
    app.add_middleware(CorrelationIdMiddleware, header_name="X-Request-ID", validator=valid_request_id)
    app.add_middleware(BodyDeadline, seconds=app.state.settings.request_body_timeout_seconds)
    errors.install(app)
    http_metrics.mount(app)
    for module in ROUTES:
        app.include_router(module.router)
    dashboard.mount(app)
    docs_pages.mount(app)
    app.openapi = partial(build_openapi, app)  # type: ignore[method-assign]
    if tracing.setup("api"):
        tracing.instrument_app(app)
    return app
