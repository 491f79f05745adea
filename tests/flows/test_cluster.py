"""Quorum queues on a three-node cluster of this run's own (bench/cluster.py): their arguments on the broker, a
start-up against queues of the other type, failover between listed nodes, and losing a node while jobs run."""

import asyncio
import itertools
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
from aio_pika.abc import AbstractIncomingMessage
from sqlalchemy import func, select
from sqlalchemy.ext.asyncio import AsyncEngine

from app.core.broker import Broker, Outgoing, PublishError
from app.core.config import Settings
from app.core.names import Lane
from app.core.resources import Resources
from app.core.statuses import DeliveryStatus, JobStatus
from app.core.topology import QUORUM_DELIVERY_LIMIT, build_topology
from app.models.tables import DELIVERIES, JOB_EVENTS, JOBS
from app.services.upkeep.janitor import DlqJanitor
from app.workers.jobs.worker import JobWorker
from tests.conftest import NS, make_settings, settings_env
from tests.local.cluster import RABBITMQ_BIN, Cluster, Node
from tests.receiver import Receiver
from tests.services.test_dlq import dlq_ids
from tests.support import ROOT, Api, BrokerProbe, app_process, free_port, wait_for

pytestmark = [
    pytest.mark.slow,  # the cluster takes ~20 s to start
    pytest.mark.skipif(not RABBITMQ_BIN.exists(), reason="needs the rabbitmq-server package (`.ci/run` has it)"),
]

# CI size; `NODE_LOSS_JOBS=1000 .venv/bin/python -m pytest tests/flows/test_cluster.py -k node`: the full run.
NODE_LOSS_JOBS = int(os.environ.get("NODE_LOSS_JOBS", "300"))
QUORUM = {"x-queue-type": "quorum", "x-dead-letter-strategy": "at-least-once", "x-overflow": "reject-publish"}


@pytest.fixture
def settings(cluster: Cluster) -> Settings:
    """This module's processes use quorum queues on the cluster, every node listed."""
    return make_settings(queue_type="quorum", rabbitmq_url=cluster.url, job_consumers_default=4, metrics_port=0)


async def declared(settings: Settings, url: str | None = None) -> Broker:
    broker = Broker(url or settings.rabbitmq_url, build_topology(settings), 5, name="test-cluster")
    await broker.start(wait=30)
    assert broker.ready.is_set()
    return broker


def arguments(row: dict[str, Any]) -> dict[str, Any]:
    return {arg[0]: arg[-1] for arg in row["arguments"]}  # [name, type, value] triples


def queue_rows(cluster: Cluster, via: Node, *columns: str) -> dict[str, dict[str, Any]]:
    return {str(row["name"]): row for row in cluster.queues(via, "name", *columns) if str(row["name"]).startswith(NS)}


async def test_every_durable_queue_is_a_replicated_quorum_queue_with_at_least_once_dead_lettering(
    cluster: Cluster, settings: Settings
) -> None:
    await (await declared(settings)).close()
    rows = await asyncio.to_thread(queue_rows, cluster, cluster.nodes[0], "type", "arguments", "members")
    topology = build_topology(settings)
    names = topology.names
    for spec in topology.queues:
        row = rows[spec.name]
        assert (row["type"], arguments(row)) == ("quorum", spec.arguments), spec.name
        assert sorted(row["members"]) == sorted(node.name for node in cluster.nodes), spec.name
    for lane in Lane:
        assert arguments(rows[names.lane_queue(lane)]) == {
            **QUORUM,
            "x-dead-letter-exchange": names.jobs_dlx,
            "x-delivery-limit": QUORUM_DELIVERY_LIMIT,
        }  # no x-max-priority: the lanes carry priority
        tier = topology.job_tiers[0]
        assert arguments(rows[names.job_tier_queue(lane, tier)]) == {
            **QUORUM,
            "x-message-ttl": tier.ttl_ms,
            "x-dead-letter-exchange": names.jobs_exchange,
            "x-dead-letter-routing-key": str(lane),
        }
    hooks = {"x-dead-letter-exchange": names.webhooks_dlx, "x-delivery-limit": QUORUM_DELIVERY_LIMIT}
    assert arguments(rows[names.webhook_deliver_queue]) == {**QUORUM, **hooks}
    assert arguments(rows[names.webhook_events_queue]) == {**QUORUM, **hooks}
    assert arguments(rows[names.jobs_dlq]) == QUORUM == arguments(rows[names.webhooks_dlq])


async def test_a_start_up_against_queues_of_the_other_type_stops_with_what_to_do(
    cluster: Cluster, settings: Settings, tmp_path: Path
) -> None:
    await (await declared(settings)).close()
    env = settings_env(make_settings(queue_type="classic", rabbitmq_url=cluster.url))
    started = await asyncio.to_thread(
        subprocess.run,
        [sys.executable, "-m", "app", "worker", "jobs"],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert started.returncode == 2, started.stderr
    first = build_topology(settings).queues[0].name
    assert f"Cannot start: The queue {first} exists on RabbitMQ with other arguments than QUEUE_TYPE=classic" in (
        started.stderr
    )
    assert "set QUEUE_TYPE (and the delay settings) back" in started.stderr
    assert "Traceback" not in started.stderr


@pytest.mark.timeout(300)  # a node's stop, the reconnect and the start again: minutes on a slow day
async def test_a_client_takes_the_first_node_that_answers_and_fails_over_when_it_goes(
    cluster: Cluster, settings: Settings
) -> None:
    nowhere = f"amqp://guest:guest@127.0.0.1:{free_port()}/"
    broker = await declared(settings, url=f"{nowhere},{cluster.url}")
    node = cluster.nodes[0]
    assert broker.connection.url.port == node.amqp_port  # the listed URL that does not answer was skipped
    got: list[bytes] = []

    async def on_message(message: AbstractIncomingMessage) -> None:
        got.append(message.body)
        await message.ack()

    channel = await broker.connection.channel()
    await channel.set_qos(prefetch_count=1)
    queue = await channel.declare_queue(f"{NS}.failover", durable=True, arguments=QUORUM)
    await queue.consume(on_message)
    try:
        await broker.publish(Outgoing("", queue.name, b"before"))
        await wait_for(lambda: _has(got, b"before"))
        await asyncio.to_thread(cluster.node_down, node)
        try:

            async def confirmed_again() -> bool:
                try:
                    await broker.publish(Outgoing("", queue.name, b"after"))
                except PublishError:
                    return False
                return True

            await wait_for(confirmed_again, within=120, interval=0.2)  # a slow day's reconnect and election
            assert broker.connection.url.port in {n.amqp_port for n in cluster.nodes[1:]}
            await wait_for(lambda: _has(got, b"after"), within=30)  # the consumer was restored on the new node
        finally:
            await asyncio.to_thread(cluster.node_up, node)
            await asyncio.to_thread(cluster.wait_until_running, len(cluster.nodes))
        await queue.delete(if_unused=False, if_empty=False)
    finally:
        await broker.close()


async def _has(got: list[bytes], body: bytes) -> bool:
    return body in got


async def test_the_janitor_leaves_a_quorum_dlq_in_its_order(
    cluster: Cluster, settings: Settings, api: Api, worker: JobWorker
) -> None:
    headers = await api.new_client("quorum-janitor")
    for _ in range(4):
        await api.submit(headers, job_type="flaky", payload={"fail_times": 5, "permanent": True})
    resources = await Resources.open(settings, role="test-janitor")
    probe = await BrokerProbe.connect(cluster.nodes[1].url, resources.topology)
    names = resources.names
    try:
        await wait_for(lambda: _depth(probe, names.jobs_dlq, 4), within=30)
        before = await dlq_ids(probe)
        # The probe and the janitor talk to different nodes: each looks once the other's returns are applied.
        await wait_for(lambda: _depth(probe, names.jobs_dlq, 4), within=30)
        removed = await DlqJanitor(resources.engine, resources.broker, names.jobs_dlq, names.webhooks_dlq).sweep()
        assert removed == {names.jobs_dlq: 0, names.webhooks_dlq: 0}  # all four are still dead: they stay
        await wait_for(lambda: _depth(probe, names.jobs_dlq, 4), within=30)
        assert await dlq_ids(probe) == before
    finally:
        await probe.purge(names.jobs_dlq)
        await probe.close()
        await resources.close()


async def test_a_message_dead_lettered_past_its_delivery_limit_goes_back_while_its_job_is_unfinished(
    cluster: Cluster, settings: Settings, api: Api
) -> None:
    headers = await api.new_client("quorum-limit")
    job = (await api.submit(headers, payload={"n": 1})).json()  # queued; no worker runs here
    resources = await Resources.open(settings, role="test-limit")
    names = resources.names
    probe = await BrokerProbe.connect(cluster.nodes[1].url, resources.topology)
    source, dead = f"{NS}.limit.source", f"{NS}.limit.dlq"
    dlx = await probe.channel.declare_exchange(f"{NS}.limit.dlx", "fanout", durable=True)
    queue = await probe.channel.declare_queue(
        source, durable=True, arguments={**QUORUM, "x-dead-letter-exchange": dlx.name, "x-delivery-limit": 1}
    )
    await (await probe.channel.declare_queue(dead, durable=True, arguments=QUORUM)).bind(dlx)
    try:
        [message] = await probe.take_all(names.lane_queue(Lane.DEFAULT))
        await resources.broker.publish(Outgoing("", source, message.body, message_id=job["id"]))
        while (held := await queue.get(no_ack=False, fail=False)) is not None:
            await held.nack(requeue=True)  # returned twice: past the limit of 1, the broker dead-letters it
        await wait_for(lambda: _depth(probe, dead, 1))
        janitor = DlqJanitor(resources.engine, resources.broker, dead, names.webhooks_dlq)
        assert (await janitor.sweep())[dead] == 1
        [back] = await probe.take_all(source)
        assert (back.message_id, back.body, await probe.depth(dead)) == (job["id"], message.body, 0)
    finally:
        for name in (source, dead):
            await probe.channel.queue_delete(name)
        await probe.channel.exchange_delete(dlx.name)
        await probe.close()
        await resources.close()


async def _depth(probe: BrokerProbe, queue: str, count: int) -> bool:
    return await probe.depth(queue) == count


@pytest.mark.timeout(300 + NODE_LOSS_JOBS // 2)  # a node's stop and start take ~10 s each, more under load
@pytest.mark.parametrize("lost", ["connected", "leader"])
async def test_losing_a_node_while_jobs_with_webhooks_run_loses_nothing_and_doubles_nothing(
    lost: str, cluster: Cluster, api: Api, db: AsyncEngine, receiver: Receiver, settings: Settings, tmp_path: Path
) -> None:
    """The node the workers are connected to, then the default lane's leader, stops mid-run and comes back."""
    topology = build_topology(settings)
    lane = topology.names.lane_queue(Lane.DEFAULT)
    await (await declared(settings)).close()
    leader = cluster.node(
        str((await asyncio.to_thread(queue_rows, cluster, cluster.nodes[0], "leader"))[lane]["leader"])
    )
    # Workers connect to the first listed node: that node is the one lost, or (second run) one that is not.
    others = [node for node in cluster.nodes if node != leader]
    order = [leader, *others] if lost == "connected" else [*others, leader]
    env = settings_env(make_settings(**{**settings.model_dump(), "rabbitmq_url": ",".join(n.url for n in order)}))
    survivor = others[-1]

    client = f"node-loss-{lost}"
    headers = await api.new_client(client)
    endpoint = await api.client.post(
        "/api/v1/webhooks", json={"url": receiver.url("/loss"), "events": ["job.succeeded"]}, headers=headers
    )
    assert endpoint.status_code == 201, endpoint.text
    with (
        app_process(["worker", "jobs"], env, tmp_path / "jobs.log") as jobs,
        app_process(["worker", "webhooks"], env, tmp_path / "hooks.log") as hooks,
    ):
        await wait_for(lambda: _consumers(cluster, survivor, lane, settings.job_consumers_default), within=60)
        ids = await _submit(api, headers, NODE_LOSS_JOBS)
        tenth = NODE_LOSS_JOBS // 10
        before = await wait_for(lambda: _finished(db, ids, at_least=tenth), within=60)
        down = order[0] if lost == "connected" else leader
        await asyncio.to_thread(cluster.node_down, down)
        try:  # work goes on without the node, then it comes back
            await wait_for(lambda: _finished(db, ids, at_least=before + tenth), within=120)
        finally:
            await asyncio.to_thread(cluster.node_up, down)
        await wait_for(lambda: _finished(db, ids, at_least=len(ids)), within=180)
        await wait_for(lambda: _arrived(receiver, len(ids)), within=120)
        await wait_for(lambda: _quiet(cluster, survivor), within=60)
        try:  # every consumer of the worker is back, restored by aio-pika or replaced by the worker's watch
            await wait_for(lambda: _consumers(cluster, survivor, lane, settings.job_consumers_default), within=60)
        except AssertionError:
            rows = await asyncio.to_thread(queue_rows, cluster, survivor, "consumers")
            raise AssertionError((rows[lane]["consumers"], jobs.output()[-6000:], hooks.output()[-2000:])) from None
    await _exactly_once(db, ids, receiver)
    pause = await _longest_pause(db, ids)
    print(
        f"\nnode lost ({lost}) with {NODE_LOSS_JOBS} jobs in flight: the longest pause between two finished jobs "
        f"was {pause:.2f}s"
    )


async def _submit(api: Api, headers: dict[str, str], count: int) -> list[str]:
    ids: list[str] = []
    for start in range(0, count, 100):
        jobs = [{"job_type": "sleep", "payload": {"seconds": 0.05}} for _ in range(start, min(start + 100, count))]
        answer = await api.client.post("/api/v1/jobs/batch", json={"jobs": jobs}, headers=headers)
        assert answer.status_code in (201, 202), answer.text
        ids += [item["job"]["id"] for item in answer.json()["items"]]
    return ids


async def _finished(db: AsyncEngine, ids: list[str], at_least: int = 0) -> int:
    query = select(func.count()).where(JOBS.c.id.in_(ids), JOBS.c.status == JobStatus.SUCCEEDED)
    async with db.connect() as conn:
        done = int((await conn.execute(query)).scalar_one())
    return done if done >= at_least else 0


async def _longest_pause(db: AsyncEngine, ids: list[str]) -> float:
    """The longest wait between two consecutive job finishes of the run: how long work paused."""
    async with db.connect() as conn:
        query = select(JOBS.c.finished_at).where(JOBS.c.id.in_(ids)).order_by(JOBS.c.finished_at)
        times = [row.finished_at for row in await conn.execute(query)]
    return max((later - earlier).total_seconds() for earlier, later in itertools.pairwise(times))


async def _arrived(receiver: Receiver, count: int) -> bool:
    return len({r.headers["webhook-id"] for r in receiver.on("/loss")}) >= count


async def _consumers(cluster: Cluster, via: Node, queue: str, count: int) -> bool:
    rows = await asyncio.to_thread(queue_rows, cluster, via, "consumers")
    return int(rows[queue]["consumers"]) == count


async def _quiet(cluster: Cluster, via: Node) -> dict[str, Any] | bool:
    """True once no queue of the namespace holds a message, ready or unacked (a tier, a lane, a DLQ)."""
    rows = await asyncio.to_thread(queue_rows, cluster, via, "messages", "messages_unacknowledged")
    return all(int(row["messages"]) == 0 and int(row["messages_unacknowledged"]) == 0 for row in rows.values())


async def _exactly_once(db: AsyncEngine, ids: list[str], receiver: Receiver) -> None:
    async with db.connect() as conn:
        succeeded = (
            await conn.execute(
                select(JOB_EVENTS.c.job_id, func.count())
                .where(JOB_EVENTS.c.job_id.in_(ids), JOB_EVENTS.c.event == JobStatus.SUCCEEDED)
                .group_by(JOB_EVENTS.c.job_id)
            )
        ).all()
        deliveries = (
            await conn.execute(
                select(DELIVERIES.c.id, DELIVERIES.c.job_id, DELIVERIES.c.status).where(DELIVERIES.c.job_id.in_(ids))
            )
        ).all()
    assert sorted(count for _, count in succeeded) == [1] * len(ids)  # every job ended once, none twice
    assert sorted(row.job_id for row in deliveries) == sorted(ids)  # one delivery per job's succeeded event
    assert {row.status for row in deliveries} == {DeliveryStatus.SUCCEEDED}
    posted = [r.headers["webhook-id"] for r in receiver.on("/loss")]
    # Each delivery arrived. A POST may repeat with its webhook-id (the contract's at-least-once: receivers
    # deduplicate on it) when a node goes away between the POST and the ack; the run reports how many did.
    assert len(set(posted)) == len(ids), len(set(posted))
    print(f"\n{len(posted) - len(ids)} POST(s) repeated with their webhook-id")
