"""Cron expressions in a time zone, by croniter: whether one is valid, and when it fires next.

Five fields (minute hour day month weekday), or six with a seconds field last (croniter's order). Daylight-saving
time follows croniter: a wall-clock time that a spring-forward gap skips fires at the first time after the gap;
one that the autumn repeat makes happen twice fires twice, once at each UTC offset.
"""

import functools
from datetime import UTC, datetime
from zoneinfo import ZoneInfo, available_timezones

from croniter import CroniterError, croniter


class BadCron(ValueError):
    """Not a cron expression croniter can read."""


class BadTimezone(ValueError):
    """Not an IANA time zone name."""


@functools.cache
def _zone_names() -> frozenset[str]:
    return frozenset(available_timezones())


def zone(name: str) -> ZoneInfo:
    """The IANA time zone `name` (e.g. Europe/Lisbon, UTC)."""
    # Only a name the tz database lists: ZoneInfo reads any path below its folders, and a folder (`Europe`)
    # raises IsADirectoryError, an OSError the API would take for an unreachable database.
    if name not in _zone_names():
        raise BadTimezone(f"{name!r} is not an IANA time zone name, such as UTC or Europe/Lisbon")
    return ZoneInfo(name)


def check(expression: str) -> str:
    """`expression` if croniter can read it and it ever fires; BadCron, saying so, if not."""
    if not croniter.is_valid(expression):
        raise BadCron(
            f"{expression!r} is not a cron expression: give five fields (minute hour day month weekday), "
            "or six with seconds last, e.g. '0 3 * * *'"
        )
    try:
        croniter(expression, datetime.now(UTC)).get_next(datetime)
    except CroniterError as exc:  # say, the 31st of February
        raise BadCron(f"{expression!r} never fires: no date matches it; check its day and month") from exc
    return expression


def next_fire(expression: str, timezone: str, after: datetime) -> datetime:
    """The first time after `after` that `expression`, read in `timezone`, names; in UTC."""
    try:
        fire = croniter(expression, after.astimezone(zone(timezone))).get_next(datetime)
    except CroniterError as exc:
        raise BadCron(str(exc)) from exc
    assert isinstance(fire, datetime)
    return fire.astimezone(UTC)
