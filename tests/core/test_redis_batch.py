"""The Redis group commit (app/core/redis_batch.py) against the real Redis: callers asking together share one
pipeline, reads with the same share key are sent once, each caller gets its own answer or error, an unknown
script is loaded and run, and a lost connection fails every caller with a RedisError."""

import asyncio
import uuid

import pytest
from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import ResponseError

from app.core.redis_batch import Merged, RedisBatch, Script
from app.services.rate_limit import SLIDE_SCRIPT
from tests.conftest import NS
from tests.support import free_port

# Counts its calls in a key of its own, so a test can tell how many times Redis ran it.
COUNTING = Script("redis.call('incr', KEYS[2]) return redis.call('get', KEYS[1])")


def key(name: str) -> str:
    return f"{NS}:redis-batch:{name}:{uuid.uuid4().hex[:8]}"


async def test_callers_asking_together_share_one_pipeline_and_each_gets_its_own_answer(redis: Redis) -> None:
    batch = RedisBatch(redis, "test-redis")
    keys = [key(f"k{i}") for i in range(20)]
    for i, name in enumerate(keys):
        await redis.set(name, f"value-{i}")
    before = batch.commit.batches
    answers = await asyncio.gather(*(batch.call("GET", name) for name in keys))
    assert answers == [f"value-{i}".encode() for i in range(20)]
    assert batch.commit.batches - before == 1
    assert batch.commit.items == 20


async def test_reads_with_one_share_key_run_once_and_every_caller_gets_the_answer(redis: Redis) -> None:
    batch = RedisBatch(redis)
    value, runs = key("value"), key("runs")
    await redis.set(value, "shared")
    shared = [batch.run_script(COUNTING, [value, runs], [], share=("look", value)) for _ in range(10)]
    alone = [batch.run_script(COUNTING, [value, runs], []) for _ in range(3)]
    answers = await asyncio.gather(*shared, *alone)
    assert answers == [b"shared"] * 13
    assert await redis.get(runs) == b"4"  # the ten shared callers once, the three others each


# Appends each call's argument to its key's list and answers the list's length and the argument back.
APPENDING = Merged(
    Script(
        "local out = {} for i, k in ipairs(KEYS) do out[#out + 1] = redis.call('rpush', k, ARGV[i]) "
        "out[#out + 1] = ARGV[i] end return out"
    ),
    arity=1,
    answers=2,
)


async def test_calls_of_a_merged_script_in_one_pipeline_go_as_one_command_in_order(redis: Redis) -> None:
    batch = RedisBatch(redis)
    lists = [key("one"), key("two")]
    calls = [batch.run_merged(APPENDING, lists[i % 2], [f"v{i}"]) for i in range(7)]
    before = batch.sent
    answers = await asyncio.gather(*calls, batch.call("GET", key("absent")))
    assert answers == [[i // 2 + 1, f"v{i}".encode()] for i in range(7)] + [None]
    assert batch.sent - before == 2  # the seven calls as one command, and the GET
    assert await redis.lrange(lists[0], 0, -1) == [b"v0", b"v2", b"v4", b"v6"]


async def test_requests_judged_together_by_the_rate_limit_script_count_in_order(redis: Redis) -> None:
    """Eight requests of one client in one pipeline, a limit of five jobs a minute: the first five are let
    through, the rest refused, each answered with the window as it was at its own turn."""
    batch = RedisBatch(redis)
    window, now = key("window"), 1_000_000.0
    calls = [batch.run_merged(SLIDE_SCRIPT, window, [now, 60.0, 5, f"r{i}", 1]) for i in range(8)]
    answers = await asyncio.gather(*calls)
    assert [(allowed, count) for allowed, count, _ in answers] == [(1, 1), (1, 2), (1, 3), (1, 4), (1, 5)] + [
        (0, 5)
    ] * 3
    assert await redis.zcard(window) == 5


async def test_a_script_redis_does_not_know_is_loaded_and_run(redis: Redis) -> None:
    batch = RedisBatch(redis)
    script = Script(f"return '{uuid.uuid4().hex}'")  # a script no Redis has seen
    assert not (await redis.script_exists(script.sha))[0]
    answers = await asyncio.gather(batch.run_script(script, [], []), batch.run_script(script, [], []))
    assert answers == [script.text.split("'")[1].encode()] * 2
    assert (await redis.script_exists(script.sha))[0]


async def test_an_error_for_one_command_fails_only_its_caller(redis: Redis) -> None:
    batch = RedisBatch(redis)
    listed, text = key("list"), key("text")
    await redis.rpush(listed, "a")
    await redis.set(text, "fine")
    wrong, right = await asyncio.gather(batch.call("GET", listed), batch.call("GET", text), return_exceptions=True)
    assert isinstance(wrong, ResponseError) and "WRONGTYPE" in str(wrong)
    assert right == b"fine"


async def test_a_lost_connection_fails_every_caller_with_a_redis_error() -> None:
    down = Redis.from_url(f"redis://127.0.0.1:{free_port()}/0", socket_connect_timeout=1)
    batch = RedisBatch(down)
    try:
        outcomes = await asyncio.gather(*(batch.call("GET", "x") for _ in range(5)), return_exceptions=True)
        assert [type(outcome) for outcome in outcomes] == [RedisConnectionError] * 5
        assert batch.commit.batches == 1  # not retried one by one: each would meet the same closed port
    finally:
        await down.aclose()


async def test_close_answers_what_is_waiting_and_then_refuses(redis: Redis) -> None:
    batch = RedisBatch(redis)
    name = key("closing")
    await redis.set(name, "last")
    waiting = asyncio.ensure_future(batch.call("GET", name))
    await asyncio.sleep(0)  # the call is in: it waits for its pipeline
    assert batch.commit.waiting == 1
    await batch.close()
    assert await waiting == b"last"
    with pytest.raises(RuntimeError, match="closed"):
        await batch.call("GET", name)
