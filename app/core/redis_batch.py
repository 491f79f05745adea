"""Group commit for Redis (DESIGN.md rule 17): the commands many callers send at the same time share one
pipeline, one write and one read, instead of one round trip each.

A caller sends one command (or one Lua script, by its hash) and awaits its own answer. Commands that are
waiting while a pipeline is in flight go together in the next one. A caller may name a `share` key: commands
with the same key in one pipeline are sent once and every such caller gets that answer. Only reads share, and
only within one pipeline, so every answer was computed after its caller asked. A script Redis does not know
(after a restart or SCRIPT FLUSH) is loaded and its commands sent again. An error Redis answers for one command
fails only its caller; a lost connection fails every caller of the pipeline with the RedisError redis-py raises.
"""

import hashlib
from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from typing import Any

from redis.asyncio import Redis
from redis.exceptions import ConnectionError as RedisConnectionError
from redis.exceptions import NoScriptError, ResponseError
from redis.exceptions import TimeoutError as RedisTimeoutError

from app.core.group_commit import GroupCommit

MAX_PIPELINE = 256


@dataclass(frozen=True)
class Script:
    """A Lua script, sent by its SHA-1 and loaded once Redis says it does not know it."""

    text: str

    @property
    def sha(self) -> str:
        return hashlib.sha1(self.text.encode(), usedforsecurity=False).hexdigest()


@dataclass(frozen=True)
class Command:
    args: tuple[Any, ...]
    share: Hashable | None = None
    script: Script | None = None


def _connection_lost(exc: BaseException) -> bool:
    """Retrying the pipeline's commands one by one would only meet the same lost connection."""
    return isinstance(exc, RedisConnectionError | RedisTimeoutError | OSError)


class RedisBatch:
    """One process's pipelines to one Redis."""

    def __init__(self, redis: Redis, name: str = "redis") -> None:
        self.redis = redis
        self.commit: GroupCommit[Command, Any] = GroupCommit(name, self._flush, MAX_PIPELINE, _connection_lost)

    async def call(self, *args: Any, share: Hashable | None = None) -> Any:
        """Send one command (`"GET", key`); its answer, or the error Redis answered for it."""
        return answer(await self.commit.run(Command(args, share)))

    async def run_script(
        self, script: Script, keys: Sequence[Any], args: Sequence[Any], share: Hashable | None = None
    ) -> Any:
        """Run a Lua script with its keys and arguments (EVALSHA); its answer, or the error it raised."""
        return answer(await self.commit.run(evalsha(script, keys, args, share)))

    async def close(self) -> None:
        await self.commit.close()

    async def _flush(self, commands: list[Command]) -> list[Any]:
        sent: dict[Hashable, int] = {}  # share key -> index in `unique`
        unique: list[Command] = []
        slots: list[int] = []
        for command in commands:
            if command.share is None:
                slots.append(len(unique))
                unique.append(command)
                continue
            if command.share not in sent:
                sent[command.share] = len(unique)
                unique.append(command)
            slots.append(sent[command.share])
        answers = await pipelined(self.redis, unique)
        return [answers[slot] for slot in slots]


def evalsha(script: Script, keys: Sequence[Any], args: Sequence[Any], share: Hashable | None = None) -> Command:
    """The command that runs a Lua script by its hash with these keys and arguments."""
    return Command(("EVALSHA", script.sha, len(keys), *keys, *args), share, script)


async def pipelined(redis: Redis, commands: Sequence[Command]) -> list[Any]:
    """The commands in one pipeline, one round trip, in order: each one's answer, or the error Redis answered for
    it. Scripts Redis does not know (after a restart or SCRIPT FLUSH) are loaded and only their commands sent
    again, so no command runs twice; a lost connection raises the RedisError redis-py raises."""
    answers = await _execute(redis, commands)
    unknown = [i for i, answer in enumerate(answers) if isinstance(answer, NoScriptError)]
    if unknown:
        scripts = {script.text for script in (commands[i].script for i in unknown) if script is not None}
        for text in scripts:
            await redis.script_load(text)
        for i, answer in zip(unknown, await _execute(redis, [commands[i] for i in unknown]), strict=True):
            answers[i] = answer
    return answers


async def _execute(redis: Redis, commands: Sequence[Command]) -> list[Any]:
    pipe = redis.pipeline(transaction=False)
    for command in commands:
        pipe.execute_command(*command.args)
    async with pipe:
        return list(await pipe.execute(raise_on_error=False))


def answer(outcome: Any) -> Any:
    """One command's answer from `pipelined`, or the error Redis answered for it, raised."""
    if isinstance(outcome, ResponseError):
        raise outcome
    return outcome
