"""A redrive's pace (app/core/pace.py): R items a second spaced 1/R apart, never more than R within a second, and a
new R in force from the moment it is set."""

from app.core.pace import Pace


def sent_over(pace: Pace, start: float, seconds: float, step: float = 0.01) -> int:
    """Items sent by turns every `step` seconds from `start` for `seconds`, each turn taking what is due."""
    total, now = 0, start
    while now < start + seconds - 1e-9:
        due = pace.due(now, 1000)
        pace.spent(due, now)
        total += due
        now += step
    return total


def test_a_pace_sends_r_a_second() -> None:
    pace = Pace(5, 0.0)
    assert sent_over(pace, 0.0, 2.0) == 10


def test_a_new_pace_is_in_force_at_once_in_either_direction() -> None:
    pace = Pace(2, 0.0)
    assert sent_over(pace, 0.0, 1.0) == 2
    pace.retime(50)
    assert sent_over(pace, 1.0, 1.0) == 50
    pace.retime(1)
    assert 2 <= sent_over(pace, 2.0, 3.0) <= 3  # once the last second's 50 have aged out, one a second


def test_what_went_within_the_last_second_counts_against_a_lower_cap() -> None:
    pace = Pace(100, 0.0)
    assert pace.due(0.0, 1000) == 1
    pace.spent(1, 0.0)
    assert sent_over(pace, 0.01, 0.5) == 50
    pace.retime(10)  # 51 went within the last second: nothing more until they are a second old
    assert pace.due(0.6, 1000) == 0
