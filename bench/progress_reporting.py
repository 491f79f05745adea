"""`python -m bench.progress_reporting <the service's arguments>`: the service with the `sleep` type reporting its
progress every 10 ms rather than every 0.5 s, the reporting arm of the progress scenario (bench/progress.py).
"""

import sys

from app.handlers import sleep

sleep.REPORT_EVERY_SECONDS = 0.01

if __name__ == "__main__":
    from app.__main__ import main

    sys.exit(main(sys.argv[1:]))
