"""A finish batch whose workflow jobs all succeeded (or will retry), with what follows them counted in the same
statement on PostgreSQL: each success counted off its waiting dependents' `deps_left` and its workflow's
`unfinished` (stores/workflows/follow.py, rule 19), in the finish's transaction. A leaf of a fan-in costs its
batch that one statement, sent alone (FINISH_COUNTED, below), where the counts were two statements of their own
between BEGIN and COMMIT.

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

_COUNTS = (
    FINISH_CTES
    + ", let_go AS (SELECT id, workflow_id FROM moved WHERE workflow_id IS NOT NULL AND status = 'succeeded'), "
    + "counted AS ("
    + count_off("depends_on_id IN (SELECT id FROM let_go)", "-1")
    + " RETURNING jobs.id, jobs.deps_left), "
    + "tallied AS ("
    + tally("(SELECT workflow_id, count(*)::int FROM let_go GROUP BY workflow_id)", "$1")
    + " RETURNING workflows.id, workflows.unfinished, workflows.status) "
    + finish_result(follows=True)
)
_RELEASED = "FROM counted WHERE deps_left <= 0"
_SETTLED = "FROM tallied WHERE (unfinished <= 0 AND status = 'running') OR (unfinished > 0 AND status <> 'running')"
FINISH_FOLLOWED = (
    _COUNTS
    + f" UNION ALL SELECT id, NULL, NULL, NULL, 'release' {_RELEASED}"
    + f" UNION ALL SELECT id, NULL, NULL, NULL, 'settle' {_SETTLED}"
)
# FINISH_FOLLOWED for a connection in autocommit, when the batch most likely has nothing to follow (a fan-in's
# leaves, all but the last): where its counts would release a dependent or settle a workflow, whose writes need
# messages built in Python in the same transaction (rule 19), a row of it divides by zero, so the statement fails
# and nothing of it is written (SQLSTATE 22012, `NOTHING_FOLLOWS_OR_ELSE`); the batch then goes the transaction's
# way. Otherwise the batch is that one statement, without the BEGIN and COMMIT of a transaction.
NOTHING_FOLLOWS_OR_ELSE = "22012"
_FAILS = "(1 / (length(id) * 0))::varchar"  # evaluated row by row: only a row that exists fails
FINISH_COUNTED = (
    _COUNTS
    + f" UNION ALL SELECT id, NULL, NULL, NULL, {_FAILS} {_RELEASED}"
    + f" UNION ALL SELECT id, NULL, NULL, NULL, {_FAILS} {_SETTLED}"
)


def counted_here(moves: Iterable[Move]) -> bool:
    """Whether what follows these moves in their workflows is all FINISH_FOLLOWED counts: every workflow job
    among them that ended, succeeded."""
    return all(
        m.after["status"] == JobStatus.SUCCEEDED
        for m in moves
        if m.after.get("workflow_id") and m.after["status"] in TERMINAL
    )
