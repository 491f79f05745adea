"""`python -m bench.peers.enqueue celery|dramatiq N` (in the peers' virtualenv): send N no-op tasks with the
peer's own client, while no worker runs; prints one JSON line."""

import json
import sys
import time


def main(argv: list[str]) -> int:
    system, count = argv[0], int(argv[1])
    started = time.perf_counter()
    if system == "celery":
        from bench.peers.celery_app import app, noop

        with app.producer_or_acquire() as producer:
            for _ in range(count):
                noop.apply_async(producer=producer)
    elif system == "dramatiq":
        from bench.peers.dramatiq_app import broker
        from bench.peers.dramatiq_app import noop as actor

        for _ in range(count):
            actor.send()
        broker.close()
    else:
        raise SystemExit(f"unknown peer {system!r}")
    print(json.dumps({"system": system, "sent": count, "elapsed_s": round(time.perf_counter() - started, 3)}))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
