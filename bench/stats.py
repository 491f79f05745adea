"""Percentiles and small summaries, the same way for every figure in the table."""

import math


def percentile(values: list[float], q: float) -> float:
    """The q-th percentile (0..100) by linear interpolation between the closest ranks."""
    if not values:
        return math.nan
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * q / 100
    low = math.floor(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def median(values: list[float | None]) -> float | None:
    """The median of the figures that were measured; None when none was."""
    known = [v for v in values if v is not None]
    return percentile(known, 50) if known else None


def summary(values: list[float]) -> dict[str, float]:
    """count, mean, p50, p95, p99 and max, rounded for the table."""
    if not values:
        return {"count": 0}
    return {
        "count": len(values),
        "mean": round(sum(values) / len(values), 3),
        "p50": round(percentile(values, 50), 3),
        "p95": round(percentile(values, 95), 3),
        "p99": round(percentile(values, 99), 3),
        "max": round(max(values), 3),
    }
