"""Live status over Server-Sent Events, through a real HTTP server, with a job worker running the jobs."""

import asyncio
import contextlib
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from typing import Any

import httpx
import pytest
import uvicorn

from app.core.broker import Outgoing
from app.core.config import Settings
from app.core.messages import dumps, event_id
from app.core.resources import Resources
from app.services.live import EventFeed, Hub, LiveEvent
from app.services.streams import EventFilter, LiveStreams
from app.services.tenancy import Principal
from app.workers.jobs.worker import JobWorker
from tests.conftest import make_settings
from tests.support import Api, free_port, until_status, wait_for

WITHIN = 20


@pytest.fixture
def settings() -> Settings:
    # A short keep-alive, so a test can wait for one.
    return make_settings(live_ping_seconds=0.5)


@pytest.fixture
async def served(api: Api) -> AsyncIterator[httpx.AsyncClient]:
    """The `api` app behind a real HTTP server (ASGITransport buffers whole responses, so it cannot stream)."""
    port = free_port()
    config = uvicorn.Config(api.app, host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    config.timeout_graceful_shutdown = 2
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:
        assert not task.done(), "the server did not start"
        await asyncio.sleep(0.01)
    try:
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=WITHIN) as client:
            yield client
    finally:
        server.should_exit = True
        await task


@dataclass
class Message:
    id: str | None
    event: str | None
    data: dict[str, Any]


@dataclass
class Stream:
    """An open text/event-stream: messages as they come, and how many comment lines went by."""

    response: httpx.Response
    comments: int = 0
    ended: bool = False
    _lines: AsyncIterator[str] | None = field(default=None, repr=False)

    async def next(self, within: float = WITHIN) -> Message | None:
        """The next message; None once the server ended the stream."""
        return await asyncio.wait_for(self._read(), within)

    async def _read(self) -> Message | None:
        self._lines = self._lines or self.response.aiter_lines()
        fields: dict[str, str] = {}
        async for line in self._lines:
            if line.startswith(":"):
                self.comments += 1
            elif line:
                name, _, value = line.partition(":")
                fields[name] = value.removeprefix(" ")
            elif "data" in fields:
                return Message(fields.get("id"), fields.get("event"), json.loads(fields["data"]))
        self.ended = True
        return None

    async def until(self, event_id_: str) -> list[Message]:
        """Every message up to and including the one with this id."""
        seen = []
        while (message := await self.next()) is not None:
            seen.append(message)
            if message.id == event_id_:
                return seen
        raise AssertionError(f"the stream ended before {event_id_}: {[m.id for m in seen]}")

    async def rest(self) -> list[Message]:
        """Every message until the server ends the stream."""
        seen = []
        while (message := await self.next()) is not None:
            seen.append(message)
        return seen


@contextlib.asynccontextmanager
async def stream(client: httpx.AsyncClient, path: str, headers: dict[str, str], **params: str) -> AsyncIterator[Stream]:
    async with client.stream("GET", path, headers=headers, params=params) as response:
        assert response.status_code == 200, await response.aread()
        assert response.headers["content-type"].startswith("text/event-stream")
        yield Stream(response)


async def submitted(api: Api, headers: dict[str, str], **body: Any) -> str:
    answer = await api.submit(headers, **body)
    assert answer.status_code == 201, answer.text
    job_id: str = answer.json()["id"]
    return job_id


def ids(job_id: str, *seqs: int) -> list[str]:
    return [event_id(job_id, seq) for seq in seqs]


def kinds(messages: list[Message]) -> list[tuple[str | None, str | None]]:
    return [(m.id, m.event) for m in messages]


async def test_job_stream_sends_the_current_state_then_each_change_and_ends(
    api: Api, served: httpx.AsyncClient, worker: JobWorker
) -> None:
    headers = await api.new_client("watcher")
    job_id = await submitted(api, headers, job_type="sleep", payload={"seconds": 1.5})
    await until_status(api, headers, job_id, WITHIN, "running")

    async with stream(served, f"/api/v1/jobs/{job_id}/stream", headers) as live:
        messages = await live.rest()
    assert kinds(messages) == list(zip(ids(job_id, 2, 3), ["job.running", "job.succeeded"], strict=True))
    running, succeeded = (m.data for m in messages)
    assert set(running) == {"id", "type", "created_at", "seq", "data"}  # as a webhook receives it
    assert (running["type"], running["seq"], running["data"]["job"]["status"]) == ("job.running", 2, "running")
    assert succeeded["data"]["job"]["result"] == {"slept": 1.5}

    async with stream(served, f"/api/v1/jobs/{job_id}/stream", headers) as again:
        assert kinds(await again.rest()) == [(event_id(job_id, 3), "job.succeeded")]  # finished: its state, the end


async def test_job_stream_sees_queued_running_succeeded_in_order(
    api: Api, served: httpx.AsyncClient, worker: JobWorker
) -> None:
    await worker.stop(grace=5)  # the job waits in its lane while the stream opens
    headers = await api.new_client("watcher-from-queued")
    job_id = await submitted(api, headers, job_type="echo", payload={"n": 1})
    await until_status(api, headers, job_id, WITHIN, "queued")
    async with stream(served, f"/api/v1/jobs/{job_id}/stream", headers) as live:
        first = await live.next()
        assert first is not None and (first.id, first.event) == (event_id(job_id, 1), "job.queued")
        await worker.start()
        messages = [first, *await live.rest()]
    assert kinds(messages) == list(
        zip(ids(job_id, 1, 2, 3), ["job.queued", "job.running", "job.succeeded"], strict=True)
    )


async def test_another_clients_job_has_no_stream(api: Api, served: httpx.AsyncClient) -> None:
    owner, other = await api.new_client("owner"), await api.new_client("nosy")
    job_id = await submitted(api, owner)
    for path in (f"/api/v1/jobs/{job_id}/stream", "/api/v1/jobs/00000000-0000-0000-0000-000000000000/stream"):
        answer = await served.get(path, headers=other)
        assert answer.status_code == 404 and answer.json()["code"] == "not_found", answer.text
    async with stream(served, f"/api/v1/jobs/{job_id}/stream", owner) as mine:
        assert (await mine.next()) is not None  # the owner's stream opens


async def test_events_stream_shows_the_callers_jobs_only_and_an_admin_all(
    api: Api, served: httpx.AsyncClient, worker: JobWorker
) -> None:
    alice, bob = await api.new_client("alice"), await api.new_client("bob")
    async with (
        stream(served, "/api/v1/events/stream", alice) as alices,
        stream(served, "/api/v1/events/stream", api.admin) as admins,
    ):
        bobs_job = await submitted(api, bob)
        await until_status(api, bob, bobs_job, WITHIN)
        alices_job = await submitted(api, alice)
        seen = await alices.until(event_id(alices_job, 3))
        everything = await admins.until(event_id(alices_job, 3))
    # Bob's events were published before Alice's job existed, so Alice would have had them first.
    assert kinds(seen) == list(
        zip(ids(alices_job, 1, 2, 3), ["job.queued", "job.running", "job.succeeded"], strict=True)
    )
    assert {m.data["data"]["job"]["client_id"] for m in seen} == {"alice"}
    ours = [m.id for m in everything if m.data["data"]["job"]["id"] in (bobs_job, alices_job)]
    assert ours == [*ids(bobs_job, 1, 2, 3), *ids(alices_job, 1, 2, 3)]  # an admin's: every client's


async def test_events_stream_filters_by_event_type_and_job_type(
    api: Api, served: httpx.AsyncClient, worker: JobWorker
) -> None:
    headers = await api.new_client("filtered")
    bad = await served.get("/api/v1/events/stream", headers=headers, params={"types": "job.running,job.exploded"})
    assert bad.status_code == 422 and "job.exploded" in bad.json()["detail"], bad.text
    async with stream(
        served, "/api/v1/events/stream", headers, types="job.succeeded,job.cancelled", job_type="sleep"
    ) as only:
        echo = await submitted(api, headers)
        await until_status(api, headers, echo, WITHIN)
        slept = await submitted(api, headers, job_type="sleep", payload={"seconds": 0})
        first = await only.next()
    assert first is not None and (first.id, first.event) == (event_id(slept, 3), "job.succeeded")


async def test_last_event_id_replays_what_was_missed_then_goes_live(
    api: Api, served: httpx.AsyncClient, worker: JobWorker
) -> None:
    headers = await api.new_client("reconnects")
    async with stream(served, "/api/v1/events/stream", headers) as witness:
        async with stream(served, "/api/v1/events/stream", headers) as first:
            one = await submitted(api, headers)
            [queued] = await first.until(event_id(one, 1))
        await until_status(api, headers, one, WITHIN)  # what the closed stream missed
        two = await submitted(api, headers)
        await until_status(api, headers, two, WITHIN)
        live = {m.id: m for m in await witness.until(event_id(two, 3))}

        async with stream(served, "/api/v1/events/stream", {**headers, "Last-Event-ID": str(queued.id)}) as resumed:
            replayed = [await resumed.next() for _ in range(5)]
            three = await submitted(api, headers)
            after = await resumed.until(event_id(three, 3))
    assert [m.id for m in replayed if m] == [*ids(one, 2, 3), *ids(two, 1, 2, 3)]
    for message in replayed:
        assert message is not None and message.data == live[str(message.id)].data  # the same JSON as live
    assert [m.id for m in after] == ids(three, 1, 2, 3)  # live, nothing twice, nothing missing


async def test_job_stream_with_last_event_id_sends_what_followed_it(
    api: Api, served: httpx.AsyncClient, worker: JobWorker
) -> None:
    headers = await api.new_client("resumes-job")
    job_id = await submitted(api, headers)
    await until_status(api, headers, job_id, WITHIN)
    resume = {**headers, "Last-Event-ID": event_id(job_id, 1)}
    async with stream(served, f"/api/v1/jobs/{job_id}/stream", resume) as resumed:
        assert [m.event for m in await resumed.rest()] == ["job.running", "job.succeeded"]


async def test_an_idle_stream_gets_keep_alive_comments(api: Api, served: httpx.AsyncClient) -> None:
    headers = await api.new_client("idle")
    async with stream(served, "/api/v1/events/stream", headers) as idle:
        reading = asyncio.create_task(idle.next())

        async def pinged() -> bool:
            return idle.comments >= 2

        await wait_for(pinged, within=5)
        reading.cancel()


def event(job_id: str, seq: int, client_id: str = "c1", job_type: str = "echo", status: str = "running") -> LiveEvent:
    return LiveEvent(event_id(job_id, seq), f"job.{status}", seq, job_id, job_type, client_id, "{}")


async def test_a_subscriber_that_falls_behind_is_closed_and_the_others_carry_on() -> None:
    hub = Hub(size=3)
    with hub.subscribed(lambda e: True) as slow, hub.subscribed(lambda e: e.client_id == "c1") as keeping_up:
        for seq in range(1, 5):
            hub.publish(event("j", seq))
            assert (await keeping_up.next()) == event("j", seq)
        assert slow.closed and slow.overflowed and (await slow.next()) is None  # the 4th found 3 waiting
        assert not keeping_up.closed and len(hub) == 1
        hub.publish(event("k", 1, client_id="c2"))  # not wanted: nothing queued
        hub.publish(event("k", 2))
        assert (await keeping_up.next()) == event("k", 2)
    assert len(hub) == 0 and keeping_up.closed


async def test_an_events_stream_that_falls_behind_ends(api: Api) -> None:
    live = api.app.state.api.live
    streams = LiveStreams(live.engine, live.names, Hub(size=2))
    alice = Principal(None, "alice", admin=False)
    events = streams.events(alice, EventFilter(), None)
    reading = asyncio.ensure_future(anext(events))

    async def subscribed() -> int:  # once the generator starts
        return len(streams.hub)

    await wait_for(subscribed, within=5)
    streams.hub.publish(event("j", 1, client_id="alice"))
    assert (await asyncio.wait_for(reading, WITHIN)).seq == 1
    for seq in (2, 3, 4):  # 2 and 3 wait, unread; 4 finds the buffer full and closes the stream
        streams.hub.publish(event("j", seq, client_id="alice"))
    with pytest.raises(StopAsyncIteration):
        await asyncio.wait_for(anext(events), WITHIN)
    assert len(streams.hub) == 0


async def test_an_event_both_replayed_and_live_goes_out_once(api: Api, worker: JobWorker) -> None:
    headers = await api.new_client("dedupe")
    job_id = await submitted(api, headers)
    await until_status(api, headers, job_id, WITHIN)
    live = api.app.state.api.live
    streams = LiveStreams(live.engine, live.names, Hub(size=16))
    events = streams.events(Principal(None, "dedupe", admin=False), EventFilter(), event_id(job_id, 1))
    first = await asyncio.wait_for(anext(events), WITHIN)  # replayed; the stream subscribed before it read
    streams.hub.publish(event(job_id, 3, client_id="dedupe", status="succeeded"))  # also in the trail
    streams.hub.publish(event(job_id, 4, client_id="dedupe", status="queued"))  # only live
    rest = [await asyncio.wait_for(anext(events), WITHIN) for _ in range(2)]
    assert [(e.seq, e.type) for e in (first, *rest)] == [(2, "job.running"), (3, "job.succeeded"), (4, "job.queued")]
    await events.aclose()


async def test_the_feed_binds_its_queue_only_while_streams_want_it(api: Api) -> None:
    """A process no stream watches receives no job event: the queue is bound when a stream opens and goes once
    none has been open for the linger time; the next stream binds a new one."""
    resources = api.app.state.runtime.resources
    broker, names = resources.broker, resources.names
    feed = EventFeed(broker, names, Hub(size=16), linger=0.4)
    await feed.start()
    try:
        assert not feed.ready.is_set() and feed.queue_name is None
        assert await feed.wanted(WITHIN)
        first = feed.queue_name
        assert first is not None and await broker.queue_depth(first) == 0
        await _arrives(feed, resources, "feed-job", "evt_feed_1")

        async def gone() -> bool:
            return feed.queue_name is None and await broker.queue_depth(first) is None

        await wait_for(gone, within=WITHIN, interval=0.1)
        assert not feed.ready.is_set()
        assert await feed.wanted(WITHIN)
        assert feed.queue_name not in (None, first)
    finally:
        await feed.stop()


async def test_a_feed_whose_consumer_is_gone_binds_a_new_queue_and_events_flow_again(api: Api) -> None:
    """A consumer lost without aio-pika noticing (its restore failed after a reconnect, say): the next stream
    binds a new queue instead of waiting on one that no longer delivers."""
    resources = api.app.state.runtime.resources
    broker, names = resources.broker, resources.names
    feed = EventFeed(broker, names, Hub(size=16), linger=60)
    await feed.start()
    try:
        assert await feed.wanted(WITHIN)
        first, bound = feed.queue_name, feed.binding
        assert first is not None and bound is not None
        channel, tag = bound
        underlay = await channel.get_underlay_channel()
        await underlay.basic_cancel(tag)  # the broker stops delivering to it; aio-pika is not told
        assert await feed.wanted(WITHIN)
        assert feed.queue_name not in (None, first)
        await _arrives(feed, resources, "lost-feed-job", "evt_lost_feed_1")
    finally:
        await feed.stop()


async def test_a_feed_whose_consumer_is_gone_ends_its_open_streams_so_their_clients_replay(api: Api) -> None:
    resources = api.app.state.runtime.resources
    feed = EventFeed(resources.broker, resources.names, Hub(size=16), linger=0.4)  # looks every 0.1 s
    await feed.start()
    try:
        assert await feed.wanted(WITHIN)
        bound = feed.binding
        assert bound is not None
        channel, tag = bound
        with feed.hub.subscribed(lambda e: True) as subscription:
            underlay = await channel.get_underlay_channel()
            await underlay.basic_cancel(tag)
            assert await asyncio.wait_for(subscription.next(), WITHIN) is None  # ended by the feed
            assert subscription.closed and not subscription.overflowed
            assert not feed.ready.is_set() and feed.queue_name is None
    finally:
        await feed.stop()


async def _arrives(feed: EventFeed, resources: Resources, job_id: str, event_id: str) -> None:
    """A job event published to the events exchange reaches a stream through the feed."""
    broker, names = resources.broker, resources.names
    with feed.hub.subscribed(lambda e: e.job_id == job_id) as subscription:
        body = {
            "id": event_id,
            "type": "job.queued",
            "seq": 1,
            "data": {"job": {"id": job_id, "job_type": "echo", "client_id": "feed"}},
        }
        key = names.event_key("echo", "queued")
        await broker.publish(Outgoing(names.events_exchange, key, dumps(body), mandatory=False))
        arrived = await asyncio.wait_for(subscription.next(), WITHIN)
        assert arrived is not None and arrived.id == event_id


REVOKED_WITHIN = 5  # the contract's bound on a revoked key's open streams


async def test_a_revoked_keys_open_streams_end_within_five_seconds(
    api: Api, served: httpx.AsyncClient, worker: JobWorker
) -> None:
    await worker.stop(grace=5)  # the job stays queued, so its stream stays open until something ends it
    created = await api.client.post("/api/v1/api-keys", json={"client_id": "revoked-watcher"}, headers=api.admin)
    revoked = {"Authorization": f"Bearer {created.json()['api_key']}"}
    job_id = await submitted(api, revoked)
    # Its confirmation commits in the background: a stream opened before it would start from pending.
    await until_status(api, revoked, job_id, WITHIN, "queued")
    async with (
        stream(served, f"/api/v1/jobs/{job_id}/stream", revoked) as job_live,
        stream(served, "/api/v1/events/stream", revoked) as events_live,
    ):
        first = await job_live.next()
        assert first is not None and first.event == "job.queued"
        answer = await api.client.delete(f"/api/v1/api-keys/{created.json()['id']}", headers=api.admin)
        assert answer.status_code == 204
        after = await asyncio.wait_for(asyncio.gather(job_live.rest(), events_live.rest()), REVOKED_WITHIN)
        assert (job_live.ended, events_live.ended, after) == (True, True, [[], []])
    await worker.start()  # the job runs now: the revoked key sees none of it
    await until_status(api, api.admin, job_id, WITHIN)
    assert (await served.get("/api/v1/events/stream", headers=revoked)).status_code == 401
