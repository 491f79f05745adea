"""Loopback ports for the processes a test or a bench run starts: one rule for every port either listens on."""

import random
import socket

# Ports for the processes a run starts, below Linux's ephemeral range (32768-60999 by default), so no outgoing
# connection can take one while its process restarts: a SIGKILLed API or a restarted PostgreSQL binds it again.
LISTEN_PORTS = range(20000, 32768)
_handed_out: set[int] = set()


def free_port() -> int:
    """A loopback port nothing listens on now, outside the ephemeral range, not handed out before by this run."""
    draw = random.Random()
    for _ in range(1000):
        port = draw.choice(LISTEN_PORTS)
        if port in _handed_out:
            continue
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
        _handed_out.add(port)
        return port
    raise RuntimeError(f"no free port in {LISTEN_PORTS.start}-{LISTEN_PORTS.stop - 1} on 127.0.0.1")


def free_ports(count: int) -> list[int]:
    """`count` ports as `free_port` gives them."""
    return [free_port() for _ in range(count)]
