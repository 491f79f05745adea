"""Each service process settles its garbage collector once it is set up (app/core/collector.py)."""

import subprocess
import sys

from app.core.collector import MIDDLE_THRESHOLD, OLD_THRESHOLD, YOUNG_THRESHOLD

PROBE = """
import gc
from app.core.collector import settle
before = gc.get_freeze_count()
settle()
print(before, gc.get_freeze_count(), *gc.get_threshold())
"""


def test_settle_freezes_what_the_process_holds_and_collects_young_objects_less_often() -> None:
    # In a process of its own: frozen objects are never freed, so the test process must not settle.
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True).stdout.split()
    before, after, *thresholds = (int(value) for value in out)
    assert before == 0 and after > 1000  # the imported modules' objects, at least
    assert thresholds == [YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD]
