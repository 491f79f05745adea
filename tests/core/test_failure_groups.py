"""A dead job's failure group: what is masked in its message, and which failures share a group."""

import pytest

from app.core.failure_groups import error_class, group_of, masked


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("job 0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0 failed", "job <id> failed"),
        ("JOB 0F1E2D3C-4B5A-4968-8776-A5B4C3D2E1F0 failed", "JOB <id> failed"),
        ("commit deadbeef0123cafe is missing", "commit <hex> is missing"),
        ("order 123 of 4 failed", "order <n> of <n> failed"),
        ("balance -4.50 is below 0", "balance <n> is below <n>"),
        ("expired at 2026-12-07T05:55:07.123Z, now later", "expired at <time>, now later"),
        ("expired at 2026-12-07 05:55:07+01:00", "expired at <time>"),
        ("no user 'alice' in \"team blue\"", "no user <value> in <value>"),
        ("connect to 'db-7:5432' refused after 3 tries", "connect to <value> refused after <n> tries"),
        # Digits inside a word name a thing (a version, a protocol), not an instance of it.
        ("http2 and v3 are off", "http2 and v3 are off"),
        ("", ""),
    ],
)
def test_what_differs_from_one_job_to_the_next_is_masked(message: str, expected: str) -> None:
    assert masked(message) == expected


def test_messages_that_differ_only_in_numbers_ids_times_or_values_share_a_group() -> None:
    one = {"type": "TransientError", "message": "flaky failure on run 3 of 2"}
    two = {"type": "TransientError", "message": "flaky failure on run 14 of 13"}
    assert group_of("flaky", one) == group_of("flaky", two)
    ids = [
        {"type": "KeyError", "message": f"no order {order} for 'cust-{n}' at 2026-01-0{n}T00:00:00Z"}
        for n, order in ((1, "0f1e2d3c-4b5a-4968-8776-a5b4c3d2e1f0"), (2, "11111111-2222-4333-8444-555555555555"))
    ]
    assert group_of("echo", ids[0]) == group_of("echo", ids[1])


def test_a_different_class_type_or_message_is_a_different_group() -> None:
    error = {"type": "TransientError", "message": "flaky failure on run 3 of 2"}
    group = group_of("flaky", error)
    assert group_of("flaky", {**error, "type": "PermanentError"}) != group
    assert group_of("sleep", error) != group
    assert group_of("flaky", {**error, "message": "flaky success on run 3 of 2"}) != group


def test_a_group_id_is_sixteen_hex_digits_and_stable() -> None:
    group = group_of("flaky", {"type": "TransientError", "message": "x"})
    assert len(group) == 16 and set(group) <= set("0123456789abcdef")
    assert group == group_of("flaky", {"type": "TransientError", "message": "x"})


def test_an_error_without_a_class_or_message_still_has_a_group() -> None:
    assert error_class(None) == error_class({}) == error_class({"type": ""}) == "Error"
    assert error_class({"type": "JobTimeout"}) == "JobTimeout"
    assert group_of("echo", None) == group_of("echo", {}) == group_of("echo", {"type": "Error", "message": ""})
