"""Pure rules: the backoff tiers, the retry decision, the status table and the priority lanes."""

import random
from datetime import UTC, datetime, timedelta

import pytest

from app.core.backoff import Tier, busy_wait, jittered_ms, job_tiers, tier_for_retry, tier_for_wait
from app.core.config import Settings
from app.core.names import Lane, broker_priority, lane_max_priority, lane_of
from app.core.statuses import TERMINAL, TRANSITIONS, JobStatus, can_move, sources_of
from app.core.topology import build_topology
from app.handlers.errors import JobTimeout, PermanentError, TransientError
from app.workers.retry_policy import DeadLetter, Retry, decide

NOW = datetime(2026, 3, 1, 12, 0, 0, tzinfo=UTC)
TIERS = job_tiers(2, 600)

# -- backoff tiers --------------------------------------------------------------------------------


def test_production_tiers_double_from_two_seconds_and_stop_at_ten_minutes() -> None:
    assert [t.delay for t in TIERS] == [2, 4, 8, 16, 32, 64, 128, 256, 512, 600]
    assert [t.index for t in TIERS] == list(range(1, 11))


def test_test_tiers_end_exactly_at_the_maximum() -> None:
    assert [t.delay for t in job_tiers(0.2, 1.6)] == pytest.approx([0.2, 0.4, 0.8, 1.6])


def test_jitter_stays_between_the_delay_and_its_ceiling_and_varies() -> None:
    rng = random.Random(1234)
    for tier in (Tier(1, 2), Tier(5, 32), Tier(10, 600)):
        draws = [jittered_ms(tier, rng) for _ in range(1000)]
        assert min(draws) >= tier.delay * 1000
        assert max(draws) <= 1.2 * tier.delay * 1000
        assert len(set(draws)) > 100, "jitter must spread messages out"


def test_a_wait_goes_to_the_shortest_tier_that_covers_it() -> None:
    assert tier_for_wait(TIERS, 0).delay == 2
    assert tier_for_wait(TIERS, 2).delay == 2
    assert tier_for_wait(TIERS, 2.1).delay == 4
    assert tier_for_wait(TIERS, 100).delay == 128
    assert tier_for_wait(TIERS, 600).delay == 600
    assert tier_for_wait(TIERS, 86_400).delay == 600  # beyond every tier: the longest


def test_a_delivery_finding_its_endpoint_busy_waits_5_then_15_then_60_seconds_beside_the_retry_tiers() -> None:
    tiers = build_topology(Settings()).webhook_tiers  # the default schedule: 5, 300, 1800, 7200, 18000, 36000 s
    assert [t.delay for t in tiers] == [5, 15, 60, 300, 1800, 7200, 18000, 36000]
    assert [busy_wait(tiers, times).delay for times in range(1, 6)] == [5, 15, 60, 60, 60]


def test_retry_numbers_clamp_to_the_tiers() -> None:
    assert tier_for_retry(TIERS, 0).delay == 2
    assert tier_for_retry(TIERS, 1).delay == 2
    assert tier_for_retry(TIERS, 3).delay == 8
    assert tier_for_retry(TIERS, 10).delay == 600
    assert tier_for_retry(TIERS, 50).delay == 600


# -- the retry decision ---------------------------------------------------------------------------


def test_a_permanent_error_dead_letters_at_once_even_with_budget_left() -> None:
    assert decide(PermanentError("bad input"), 1, 5, TIERS, NOW) == DeadLetter("permanent_error")


@pytest.mark.parametrize("attempts", [1, 2, 3])
def test_a_transient_error_within_budget_retries_after_tier_k(attempts: int) -> None:
    outcome = decide(TransientError("503"), attempts, 3, TIERS, NOW, random.Random(7))
    assert isinstance(outcome, Retry)
    assert outcome.tier.index == attempts
    assert outcome.next_attempt_at == NOW + timedelta(seconds=2 ** (attempts - 1) * 2)
    assert outcome.tier.delay * 1000 <= outcome.expiration_ms <= outcome.tier.ceiling * 1000


def test_the_last_attempt_of_the_budget_dead_letters_as_exhausted() -> None:
    assert decide(TransientError("503"), 4, 3, TIERS, NOW) == DeadLetter("retries_exhausted")


def test_a_timeout_on_the_last_attempt_dead_letters_as_timeout() -> None:
    assert decide(JobTimeout("ran 30s"), 4, 3, TIERS, NOW) == DeadLetter("timeout")
    assert isinstance(decide(JobTimeout("ran 30s"), 1, 3, TIERS, NOW), Retry)


def test_an_unexpected_exception_counts_as_transient() -> None:
    outcome = decide(ValueError("surprise"), 2, 3, TIERS, NOW)
    assert isinstance(outcome, Retry)
    assert outcome.tier.delay == 4
    assert decide(ValueError("surprise"), 4, 3, TIERS, NOW) == DeadLetter("retries_exhausted")


def test_no_retries_allowed_means_the_first_failure_is_final() -> None:
    assert decide(TransientError("503"), 1, 0, TIERS, NOW) == DeadLetter("retries_exhausted")


@pytest.mark.parametrize(
    ("asked", "wait", "tier"),
    [
        (30.0, 30.0, 16),  # between tiers: the tier below, the rest deferred until next_attempt_at
        (64.0, 64.0, 64),
        (0.0, 2.0, 2),  # never sooner than the shortest retry
        (86_400.0, 600.0, 600),  # never later than the longest
    ],
)
def test_a_retry_after_sets_the_retrys_delay_within_the_shortest_and_longest_tiers(
    asked: float, wait: float, tier: float
) -> None:
    outcome = decide(TransientError("503", retry_after=asked), 1, 3, TIERS, NOW)
    assert isinstance(outcome, Retry)
    assert outcome.next_attempt_at == NOW + timedelta(seconds=wait)
    assert outcome.tier.delay == tier
    assert outcome.expiration_ms == min(round(wait * 1000), outcome.tier.ttl_ms)


def test_a_retry_after_does_not_stretch_the_retry_budget() -> None:
    assert decide(TransientError("429", retry_after=5), 4, 3, TIERS, NOW) == DeadLetter("retries_exhausted")


# -- the status table -----------------------------------------------------------------------------


def test_every_status_has_a_row_in_the_table() -> None:
    assert set(TRANSITIONS) == set(JobStatus)
    assert all(target in JobStatus for targets in TRANSITIONS.values() for target in targets)


def test_succeeded_and_cancelled_are_dead_ends() -> None:
    assert TRANSITIONS[JobStatus.SUCCEEDED] == frozenset()
    assert TRANSITIONS[JobStatus.CANCELLED] == frozenset()
    assert {JobStatus.SUCCEEDED, JobStatus.CANCELLED, JobStatus.DEAD_LETTERED} == TERMINAL


def test_running_is_reached_from_the_claimable_statuses_only() -> None:
    assert set(sources_of(JobStatus.RUNNING)) == {
        JobStatus.PENDING,
        JobStatus.QUEUED,
        JobStatus.RUNNING,
        JobStatus.RETRYING,
    }


def test_a_dead_lettered_job_may_be_replayed_but_nothing_leaves_succeeded() -> None:
    assert can_move(JobStatus.DEAD_LETTERED, JobStatus.QUEUED)
    assert TRANSITIONS[JobStatus.DEAD_LETTERED] == {JobStatus.QUEUED}
    assert not can_move(JobStatus.SUCCEEDED, JobStatus.QUEUED)
    assert JobStatus.SUCCEEDED not in sources_of(JobStatus.QUEUED)


# -- priority lanes -------------------------------------------------------------------------------


def test_priorities_split_into_three_lanes() -> None:
    lanes = {priority: lane_of(priority) for priority in range(1, 11)}
    assert lanes == {
        **dict.fromkeys([1, 2, 3], Lane.CRITICAL),
        **dict.fromkeys([4, 5, 6, 7], Lane.DEFAULT),
        **dict.fromkeys([8, 9, 10], Lane.BULK),
    }
    for outside in (0, 11):
        with pytest.raises(ValueError, match=r"must be 1\.\.10"):
            lane_of(outside)


def test_the_most_urgent_job_of_a_lane_gets_the_lanes_top_broker_priority() -> None:
    assert broker_priority(1) == lane_max_priority(Lane.CRITICAL) == 3
    assert broker_priority(4) == lane_max_priority(Lane.DEFAULT) == 4
    assert broker_priority(8) == lane_max_priority(Lane.BULK) == 3
    # ... and the least urgent the bottom, 1 (0 would mean "no priority").
    assert [broker_priority(p) for p in (3, 7, 10)] == [1, 1, 1]
    assert [broker_priority(p) for p in range(4, 8)] == [4, 3, 2, 1]
