"""Direct replies to submitters that wait (`?wait=`): sent once the commit that finished the job is done, best
effort and off the ack path. A reply that is lost costs its waiter nothing but a database poll."""

import asyncio

from app.core.broker import Broker
from app.core.incoming import Message
from app.core.messages import JobReply, job_reply
from app.core.statuses import JobStatus


class JobReplies:
    def __init__(self, broker: Broker) -> None:
        self._broker = broker
        self._sending: set[asyncio.Task[bool]] = set()

    def succeeded(self, message: Message, job_id: str) -> None:
        """The job of this message has succeeded: reply if asked to."""
        self.send(message, job_id, JobStatus.SUCCEEDED)

    def dead_lettered(self, message: Message, job_id: str) -> None:
        """The job of this message was dead-lettered: reply if asked to."""
        self.send(message, job_id, JobStatus.DEAD_LETTERED)

    def send(self, message: Message, job_id: str, status: JobStatus) -> None:
        """Reply when the message asked for it; returns at once."""
        if message.reply_to is None:
            return
        reply = job_reply(message.reply_to, message.correlation_id, JobReply(job_id, str(status)))
        task = asyncio.create_task(self._broker.send(reply), name="job-reply")
        self._sending.add(task)
        task.add_done_callback(self._sending.discard)

    async def close(self) -> None:
        """Let the replies in flight go out."""
        await asyncio.gather(*self._sending, return_exceptions=True)
