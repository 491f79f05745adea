"""A three-node RabbitMQ cluster on this machine, beside the system broker, for the tests and for trying it.

`python -m bench.cluster start [DIR]` starts nodes taskq-a, taskq-b and taskq-c (@localhost) on AMQP ports
5681-5683 (distribution ports 25681-25683; the tests take free ports instead), with their own data, log and
config files and their own Erlang cookie, all under DIR (default `var/cluster`), joins b and c to a, waits until
all three run, and prints the `RABBITMQ_URL` that lists them. `python -m bench.cluster stop [DIR]` stops them and
removes DIR. The system node (rabbit@localhost, port 5672) is never touched: it shares only epmd, which every
Erlang node on a host shares.
"""

import subprocess
import sys
from pathlib import Path

from tests.local.cluster import CLI_PORTS, Cluster


def main(argv: list[str]) -> int:
    if len(argv) not in (1, 2) or argv[0] not in ("start", "stop"):
        print("usage: python -m bench.cluster start|stop [DIR]  (DIR defaults to var/cluster)", file=sys.stderr)
        return 2
    root = Path(argv[1] if len(argv) == 2 else "var/cluster").resolve()
    if argv[0] == "stop":
        if not (root / "cluster.json").exists():
            print(f"No cluster was started in {root}.", file=sys.stderr)
            return 1
        Cluster.load(root).stop()
        print(f"Stopped the cluster and removed {root}.")
        return 0
    if (root / "cluster.json").exists():
        print(f"A cluster already runs from {root}; stop it first: python -m bench.cluster stop", file=sys.stderr)
        return 1
    cluster = Cluster.plan(root, ports=CLI_PORTS)
    try:
        cluster.start()
    except (RuntimeError, subprocess.TimeoutExpired) as exc:
        print(f"The cluster did not start ({exc}); logs are in {root}/*/log. Stopping what started.", file=sys.stderr)
        cluster.stop()
        return 1
    print(f"Three nodes run. Use them with:\n\n    QUEUE_TYPE=quorum RABBITMQ_URL={cluster.url}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
