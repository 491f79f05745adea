"""The job-type circuit breakers, as every process sees them."""

from fastapi import APIRouter

from app.api.deps import PrincipalDep, StateDep
from app.schemas.circuit import CircuitOut
from app.schemas.payloads.registry import PAYLOADS

router = APIRouter(prefix="/api/v1/circuits", tags=["operations"])


@router.get("", response_model=list[CircuitOut])
async def list_circuits(state: StateDep, _: PrincipalDep) -> list[CircuitOut]:
    """Each job type's breaker: `closed`, `open` (submits answer 503) or `half_open` (one probe runs)."""
    circuits = [await state.breakers.check(name) for name in sorted(PAYLOADS)]
    return [
        CircuitOut(job_type=c.job_type, state=c.state, calls=c.calls, failures=c.failures, retry_after=c.retry_after)
        for c in circuits
    ]
