"""The fault run's own logic (`make chaos` runs it for real): the seeded schedule and the audit-trail check."""

from collections import Counter

from bench.chaos import API_KILLS, WORKER_KILLS, Submitted, fault_schedule
from bench.chaos_checks import legal

WORKERS = ["jobs-1", "jobs-2", "webhooks"]


def test_the_schedule_holds_every_fault_the_run_promises_inside_the_window_and_repeats_for_a_seed() -> None:
    faults = fault_schedule(7, 50.0, WORKERS)
    kinds = Counter(f.kind if f.kind != "kill" else f"kill {'api' if f.target == 'api' else 'worker'}" for f in faults)
    assert kinds == {"kill worker": WORKER_KILLS, "kill api": API_KILLS, "rabbitmq": 1, "redis": 1, "postgres": 1}
    assert all(0 < f.at < 50.0 for f in faults) and [f.at for f in faults] == sorted(f.at for f in faults)
    assert fault_schedule(7, 50.0, WORKERS) == faults
    assert fault_schedule(8, 50.0, WORKERS) != faults


def test_a_trail_is_legal_only_as_a_path_of_the_transition_table_ending_in_the_jobs_status() -> None:
    retried = ["created", "queued", "running", "retrying", "queued", "running", "succeeded", "delivery"]
    assert legal(retried, "succeeded")
    assert legal(["created", "queued", "running", "running", "dead_lettered", "replayed", "queued"], "queued")
    assert not legal(retried, "dead_lettered")  # ends elsewhere than the job's status
    assert not legal(["created", "queued", "succeeded"], "succeeded")  # queued -> succeeded skips running
    assert not legal(["created", "queued", "running", "succeeded", "running", "succeeded"], "succeeded")
    assert not legal(["queued", "running", "succeeded"], "succeeded")  # no created entry


def test_a_flaky_job_is_expected_to_fail_only_its_first_runs_counting_those_a_kill_cut_short() -> None:
    permanent = Submitted("k1", "flaky", "dead_lettered", {"fail_times": 1, "permanent": True})
    transient = Submitted("k2", "flaky", "succeeded", {"fail_times": 2})
    echo = Submitted("k3", "echo", "succeeded", {"n": 1})
    assert [permanent.expected_after(runs) for runs in (1, 2)] == ["dead_lettered", "succeeded"]
    expected = ["retrying", "retrying", "succeeded", "succeeded"]
    assert [transient.expected_after(runs) for runs in (1, 2, 3, 4)] == expected
    assert [echo.expected_after(runs) for runs in (1, 3)] == ["succeeded", "succeeded"]
