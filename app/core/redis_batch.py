"""Group commit for Redis (DESIGN.md rule 17): the commands many callers send at the same time share one
pipeline, one write and one read, instead of one round trip each.

A caller sends one command (or one Lua script, by its hash) and awaits its own answer. Commands that are
waiting while a pipeline is in flight go together in the next one. A caller may name a `share` key: commands
with the same key in one pipeline are sent once and every such caller gets that answer. Only reads share, and
only within one pipeline, so every answer was computed after its caller asked. Calls of a `Merged` script in one
pipeline go as one command, after the pipeline's other commands, that takes all their keys and arguments in the
order the calls were made; each caller gets its own part of the answer. A script Redis does not know
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
class Merged:
    """A Lua script that serves many calls at once: each call brings one key and `arity` arguments (KEYS[i],
    ARGV[(i-1)*arity+1 .. i*arity]) and gets `answers` values of the flat list the script returns, in order."""

    script: Script
    arity: int
    answers: int


@dataclass(frozen=True)
class Command:
    args: tuple[Any, ...]
    share: Hashable | None = None
    script: Script | None = None
    merged: Merged | None = None  # then `args` is (key, *its arity arguments)


def _connection_lost(exc: BaseException) -> bool:
    """Retrying the pipeline's commands one by one would only meet the same lost connection."""
    return isinstance(exc, RedisConnectionError | RedisTimeoutError | OSError)


class RedisBatch:
    """One process's pipelines to one Redis."""

    def __init__(self, redis: Redis, name: str = "redis") -> None:
        self.redis = redis
        self.sent = 0  # commands sent to Redis, merged ones counted once
        self.commit: GroupCommit[Command, Any] = GroupCommit(name, self._flush, MAX_PIPELINE, _connection_lost)

    async def call(self, *args: Any, share: Hashable | None = None) -> Any:
        """Send one command (`"GET", key`); its answer, or the error Redis answered for it."""
        return answer(await self.commit.run(Command(args, share)))

    async def run_script(
        self, script: Script, keys: Sequence[Any], args: Sequence[Any], share: Hashable | None = None
    ) -> Any:
        """Run a Lua script with its keys and arguments (EVALSHA); its answer, or the error it raised."""
        return answer(await self.commit.run(evalsha(script, keys, args, share)))

    async def run_merged(self, merged: Merged, key: Any, args: Sequence[Any]) -> list[Any]:
        """One call of a merged script: its part of the answer of the command that served every such call of
        the pipeline, or the error that command raised."""
        if len(args) != merged.arity:
            raise ValueError(f"a call of this script takes {merged.arity} arguments, not {len(args)}")
        outcome = answer(await self.commit.run(Command((key, *args), merged=merged)))
        assert isinstance(outcome, list)
        return outcome

    async def close(self) -> None:
        await self.commit.close()

    async def _flush(self, commands: list[Command]) -> list[Any]:
        sent: dict[Hashable, int] = {}  # share key -> index in `unique`
        unique: list[Command] = []
        slots: list[int] = []
        calls: dict[Merged, list[int]] = {}  # merged script -> the commands calling it, in order
        for index, command in enumerate(commands):
            if command.merged is not None:
                calls.setdefault(command.merged, []).append(index)
                slots.append(-1)
            elif command.share is None:
                slots.append(len(unique))
                unique.append(command)
            else:
                if command.share not in sent:
                    sent[command.share] = len(unique)
                    unique.append(command)
                slots.append(sent[command.share])
        first_merged = len(unique)
        unique += [_merge(merged, [commands[i] for i in indexes]) for merged, indexes in calls.items()]
        self.sent += len(unique)
        answers = await pipelined(self.redis, unique)
        outcomes = [answers[slot] if slot >= 0 else None for slot in slots]
        for (merged, indexes), whole in zip(calls.items(), answers[first_merged:], strict=True):
            for n, i in enumerate(indexes):
                outcomes[i] = (
                    whole if isinstance(whole, Exception) else whole[n * merged.answers : (n + 1) * merged.answers]
                )
        return outcomes


def _merge(merged: Merged, commands: list[Command]) -> Command:
    """The one command that serves these calls of a merged script: every key, then every call's arguments."""
    keys = [command.args[0] for command in commands]
    args = [arg for command in commands for arg in command.args[1:]]
    return evalsha(merged.script, keys, args)


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
