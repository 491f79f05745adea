"""How much each scenario does: the full run's sizes and the quick check's, and the drain time budget."""

from dataclasses import asdict, dataclass


@dataclass(frozen=True)
class Sizes:
    ingest_requests: int  # per concurrency level, after the warm-up (but the target level's: below)
    ingest_round_requests: int  # at 32 clients, in each round: long enough that a passing stall averages out
    ingest_warmup: int
    ingest_rounds: int  # at 32 clients: the service, then baseline (a), this many times; the rows show medians
    publish_messages: int  # raw confirmed publishes, the broker's floor for one message per job
    batch_jobs: int  # jobs submitted through POST /api/v1/jobs/batch, after one warm-up round
    drain_jobs: int  # also the peers' (Celery, Dramatiq) no-op tasks
    peers: bool  # whether the end-to-end scenario drains the same N with Celery and Dramatiq
    drain_rounds: int  # rounds at C = 32, each ours, (a), (b) and the peers in turn; the rows show medians
    latency_rate: float  # jobs/s for end-to-end latency
    latency_jobs: int
    hook_jobs: int  # deliveries drained for deliveries/s
    hook_rounds: int  # delivery drains, each beside its raw baseline; the rows show medians
    hook_rate: float  # jobs/s for submit -> callback latency
    hook_latency_jobs: int
    slow_rate: float  # jobs/s in each phase of the slow-endpoint scenario
    slow_jobs: int  # jobs per phase: with the fast endpoint alone, beside a second fast one, then beside the slow one
    overload_seconds: float  # how long the overload scenario's clients keep sending
    cost_rounds: int  # rounds of each arm (metrics on, off) in the metrics-cost scenario
    prune_jobs: int  # finished jobs the retention scenario prunes beside each drain
    prune_rounds: int  # rounds of each arm (nothing pruned, pruning) in the retention scenario
    noisy_jobs: int  # client A's backlog in the noisy-neighbour scenario
    workflow_fan_in: int  # the workflows scenario's independent jobs that all feed one final job
    workflow_chain: int  # jobs in each of its chains (each depends on the one before)
    workflow_rounds: int  # rounds of its fan-in arms (workflow, batch) and chains of each kind
    workflow_submit_jobs: int  # jobs in each of its submits (a workflow, a batch)
    workflow_submit_rounds: int  # rounds of its submits, each kind once a round
    cancel_rounds: int  # running jobs of each handler (sleep, image) the cancel scenario cancels, one at a time
    dlq_dead_jobs: int  # dead jobs the dlq-groups scenario groups
    dlq_calls: int  # rounds of its timed calls (groups and plain list, admin and client key)
    scale_jobs: int  # jobs per drain of the scaling scenario (1, 2, 4 worker processes; classic and quorum)
    scale_max_workers: int  # the most job-worker processes a scaling drain runs (of 1, 2, 4)
    soak_jobs: int
    soak_checkpoint: int
    overview_jobs: int  # jobs in the table the overview scenario reads
    overview_calls: int  # calls of each kind it times, per arm (cold, warm)

    def shown(self) -> dict[str, object]:
        return asdict(self)


FULL = Sizes(
    ingest_requests=2000,
    ingest_round_requests=6000,
    ingest_warmup=100,
    ingest_rounds=5,
    publish_messages=20_000,
    batch_jobs=20_000,
    drain_jobs=3000,
    peers=True,
    drain_rounds=3,
    latency_rate=20,
    latency_jobs=600,
    hook_jobs=1000,
    hook_rounds=3,
    hook_rate=100,
    hook_latency_jobs=2000,
    slow_rate=50,
    slow_jobs=1000,
    overload_seconds=60,
    cost_rounds=3,
    prune_jobs=100_000,
    prune_rounds=3,
    noisy_jobs=20_000,
    workflow_fan_in=1000,
    workflow_chain=50,
    workflow_rounds=5,
    workflow_submit_jobs=500,
    workflow_submit_rounds=21,
    cancel_rounds=40,
    dlq_dead_jobs=100_000,
    dlq_calls=20,
    scale_jobs=6000,
    scale_max_workers=4,
    soak_jobs=50_000,
    soak_checkpoint=10_000,
    overview_jobs=1_000_000,
    overview_calls=20,
)
QUICK = Sizes(
    ingest_requests=100,
    ingest_round_requests=100,
    ingest_warmup=10,
    ingest_rounds=1,
    publish_messages=1000,
    batch_jobs=2000,
    drain_jobs=300,
    peers=False,
    drain_rounds=1,
    latency_rate=20,
    latency_jobs=40,
    hook_jobs=100,
    hook_rounds=1,
    hook_rate=100,
    hook_latency_jobs=100,
    slow_rate=50,
    slow_jobs=250,
    overload_seconds=5,
    cost_rounds=1,
    prune_jobs=5000,
    prune_rounds=1,
    noisy_jobs=1000,
    workflow_fan_in=100,
    workflow_chain=20,
    workflow_rounds=1,
    workflow_submit_jobs=100,
    workflow_submit_rounds=3,
    cancel_rounds=3,
    dlq_dead_jobs=5000,
    dlq_calls=5,
    scale_jobs=300,
    scale_max_workers=2,
    soak_jobs=1000,
    soak_checkpoint=200,
    overview_jobs=20_000,
    overview_calls=5,
)


def drain_budget(jobs: int) -> float:
    """Seconds a drain may take before the scenario gives up (at 5 jobs/s at worst, and 2 minutes at least)."""
    return max(120.0, jobs / 5)
