"""Progress from a function that runs in the CPU pool's process (a PDF's pages, an image's operations): `report`
sends it over the pool's pipe to the worker, which hands it to the run's progress sink; the same function called
anywhere else (a test, the API) reports to nothing. The pool's process runs one function at a time, so one sender
per process is all there is."""

from collections.abc import Callable
from typing import Any

_send: Callable[[Any], None] | None = None

REPORT = "progress"  # the first item of a report on the pipe; an outcome is (ok, value)


def attach(send: Callable[[Any], None]) -> None:
    """In a pool process: where its reports go (the pipe to the worker)."""
    global _send
    _send = send


def report(fraction: float, message: str | None = None) -> None:
    """How far the function is, 0 to 1, with a short message; nothing outside a pool process."""
    if not 0 <= fraction <= 1:
        raise ValueError(f"a report's fraction is from 0 to 1, not {fraction!r}")
    if _send is not None:
        _send((REPORT, float(fraction), message))


def is_report(item: Any) -> bool:
    return isinstance(item, tuple) and len(item) == 3 and item[0] == REPORT
