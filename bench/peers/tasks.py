"""What every peer task does, the same for Celery and Dramatiq: nothing, then one Redis round trip that records
it (runs in the peers' virtualenv).

One Lua script per task keeps, under the run's key prefix, the earliest start (`first`), the latest finish
(`last`) and a count (`done`): the drain's window is `last - first` on this machine's clock, and the bench
knows the N-th completion by polling `done`, with no result backend.
"""

import os
import time

import redis

REDIS_URL = os.environ.get("BENCH_PEER_REDIS", "redis://127.0.0.1:6379/0")
AMQP_URL = os.environ.get("BENCH_PEER_AMQP", "amqp://guest:guest@127.0.0.1:5672/")
QUEUE = os.environ.get("BENCH_PEER_QUEUE", "bench.peers")
PREFIX = os.environ.get("BENCH_PEER_KEYS", "bench:peers")

RECORD = """
local first = redis.call('GET', KEYS[1])
if (not first) or tonumber(ARGV[1]) < tonumber(first) then redis.call('SET', KEYS[1], ARGV[1]) end
local last = redis.call('GET', KEYS[2])
if (not last) or tonumber(ARGV[2]) > tonumber(last) then redis.call('SET', KEYS[2], ARGV[2]) end
return redis.call('INCR', KEYS[3])
"""
KEYS = [f"{PREFIX}:first", f"{PREFIX}:last", f"{PREFIX}:done"]

_client = redis.Redis.from_url(REDIS_URL)  # a pool per process (redis-py starts a new one after a fork)
_record = _client.register_script(RECORD)


def noop() -> None:
    """The task: no work, then its record."""
    started = time.time()
    _record(keys=KEYS, args=[f"{started:.6f}", f"{time.time():.6f}"])
