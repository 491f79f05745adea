"""`python -m bench.tracing_off <the service's arguments>`: the service with tracing's code path taken out, the
baseline of the tracing scenario's no-cost row (bench/tracing.py): every span, header and annotation of
app/core/tracing.py a no-op that checks nothing, so what remains is the job path without tracing.
"""

import sys
from contextlib import AbstractContextManager
from typing import Any

from app.core import tracing


def _nothing(*args: Any, **kwargs: Any) -> AbstractContextManager[None]:
    return tracing.OFF


def _enabled() -> bool:
    return False


tracing.span = _nothing
tracing.consuming = _nothing
tracing.enabled = _enabled
tracing.annotate = lambda **attributes: None

if __name__ == "__main__":
    from app.__main__ import main

    sys.exit(main(sys.argv[1:]))
