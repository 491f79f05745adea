"""Fair turns between clients in a lane (docs/flow-control.md, DESIGN.md rule 18). A lane is one FIFO queue; so
that one client's backlog cannot stand in front of another's new job, each client keeps at most its share of a
lane in the queue, and its other new jobs wait their turn in the database (`held = 'fair'`, `queued`), released
oldest first as its share drains: by the worker that claims one of its jobs (their messages say so), and by the
`held_release` sweep of every process. Clients with nothing waiting pay one bounded read per submit flush."""

from collections.abc import Sequence
from dataclasses import dataclass, replace

from loguru import logger

from app.core.lane_shares import LaneShares
from app.core.messages import JobMessage, job_event
from app.core.names import Names, lane_of
from app.core.resources import Resources
from app.core.statuses import HeldReason, JobStatus
from app.models.rows import job_with
from app.services.outbox import Outbox
from app.services.submit import Draft
from app.stores.flow import FairStore
from app.stores.flow.fair import LaneRef, LaneState

OFF_BATCH = 2000


def waiting_turn(names: Names, draft: Draft) -> Draft:
    """A new job saved to wait its turn: `queued` as it is saved, held, its outbox row the `job.queued` event."""
    job = job_with(draft.job, status=str(JobStatus.QUEUED), seq=1, held=str(HeldReason.FAIR))
    return replace(draft, job=job, message=job_event(names, job, job["created_at"]))


def flagged(draft: Draft) -> Draft:
    """A new job that goes to its lane while others of its client wait: its claim releases the next."""
    body = replace(JobMessage.from_bytes(draft.message.body), fair=True).to_bytes()
    return replace(draft, message=replace(draft.message, body=body))


@dataclass
class Fairness:
    store: FairStore
    shares: LaneShares
    names: Names
    outbox: Outbox

    async def admit(self, drafts: Sequence[Draft]) -> tuple[list[Draft], list[LaneRef]]:
        """One flush's new jobs as they are to be saved: each client's in a lane up to its share's room go to the
        lane, the rest wait their turn (all of them while older ones wait, so a client's order holds); and the
        lanes whose waiting jobs have room now, to release once the flush is saved."""
        refs = sorted({self._ref(d) for d in drafts if not d.dormant})
        if not self.shares.on or not refs:
            return list(drafts), []
        states = await self.store.lanes(refs, max(self.shares.share(ref.lane) for ref in refs))
        room = {ref: 0 if state.backlog else self._room(ref, state) for ref, state in states.items()}
        out, behind = [], {ref for ref, state in states.items() if state.backlog}
        for draft in drafts:
            ref = self._ref(draft)
            if draft.dormant:  # it waits for its time or its dependencies, which send it
                out.append(draft)
            elif room[ref] > 0:
                room[ref] -= 1
                out.append(draft)
            else:
                out.append(waiting_turn(self.names, draft))
                behind.add(ref)
        out = [flagged(d) if not d.waits and self._ref(d) in behind else d for d in out]
        return out, [ref for ref, state in states.items() if state.backlog and self._room(ref, state) > 0]

    @staticmethod
    def _ref(draft: Draft) -> LaneRef:
        return LaneRef(draft.job["client_id"], lane_of(draft.job["priority"]))

    def _room(self, ref: LaneRef, state: LaneState) -> int:
        return max(0, self.shares.share(ref.lane) - state.in_lane)

    async def release(self, refs: Sequence[LaneRef] | None, least: float = 0.0) -> int:
        """Release the jobs waiting their turn that their lanes' shares have room for (None: every client's), when
        the room is at least `least` of the share, then publish them (what the broker does not confirm, the relay
        sends)."""
        # With fair turns off, jobs that waited their turn before go to their lanes a batch a pass.
        share = self.shares.share if self.shares.on else lambda _: OFF_BATCH
        staged = await self.store.release(refs, share, least)
        await self.outbox.publish(staged)
        if refs is None and staged:
            logger.info("released {} job(s) waiting their turn to their lanes", len(staged))
        return len(staged)


def fairness(resources: Resources, outbox: Outbox) -> Fairness:
    """A process's fair turns: its database's store, the lanes' shares as its broker reads them."""
    return Fairness(resources.stores.fair, resources.shares, resources.names, outbox)
