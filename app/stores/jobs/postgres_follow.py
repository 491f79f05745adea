"""A finish batch whose workflow jobs all succeeded (or will retry), with what follows them counted in the same
statement on PostgreSQL: each success counted off its waiting dependents' `deps_left` and its workflow's
`unfinished` (stores/workflows/follow.py, rule 19), in the finish's transaction. A leaf of a fan-in costs its
batch that one statement between BEGIN and COMMIT, where the counts were two statements of their own.

The statement returns, beside the finish's rows, the dependents it counted to 0 and the workflows whose status the
count changes (follow._settled: a running one counted to 0 ends). What follows those (a release, a workflow's end)
needs messages built here, so it is written by
`follow.after_counts` in the same transaction before the COMMIT. Any other outcome of a workflow's job (one that
ended dead-lettered or cancelled, whose policy decides) goes through `follow.follow` as before."""

from collections.abc import Iterable

from app.core.statuses import TERMINAL, JobStatus
from app.stores.jobs.moves import Move
from app.stores.jobs.postgres_sql import FINISH_CTES, finish_result
from app.stores.workflows.postgres import count_off, tally

FINISH_FOLLOWED = (
    FINISH_CTES
    + ", let_go AS (SELECT id, workflow_id FROM moved WHERE workflow_id IS NOT NULL AND status = 'succeeded'), "
    + "counted AS ("
    + count_off("depends_on_id IN (SELECT id FROM let_go)", "-1")
    + " RETURNING jobs.id, jobs.deps_left), "
    + "tallied AS ("
    + tally("(SELECT workflow_id, count(*)::int FROM let_go GROUP BY workflow_id)", "$1")
    + " RETURNING workflows.id, workflows.unfinished, workflows.status) "
    + finish_result(follows=True)
    + " UNION ALL SELECT id, NULL, NULL, NULL, 'release' FROM counted WHERE deps_left <= 0"
    + " UNION ALL SELECT id, NULL, NULL, NULL, 'settle' FROM tallied"
    + " WHERE (unfinished <= 0 AND status = 'running') OR (unfinished > 0 AND status <> 'running')"
)


def counted_here(moves: Iterable[Move]) -> bool:
    """Whether what follows these moves in their workflows is all FINISH_FOLLOWED counts: every workflow job
    among them that ended, succeeded."""
    return all(
        m.after["status"] == JobStatus.SUCCEEDED
        for m in moves
        if m.after.get("workflow_id") and m.after["status"] in TERMINAL
    )
