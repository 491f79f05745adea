"""`python -m tests.offline_app <the service's arguments>`: the service with name lookups that never leave the
machine, for the fuzz run (tests/api/test_fuzz_api.py), whose generated URLs name hosts anywhere.

An IP literal and `localhost` resolve as usual; any other name fails at once as an unknown host would, so no
DNS query is sent. uvloop is kept out (its resolver would bypass this one), so the event loop is asyncio's.
"""

import ipaddress
import socket
import sys
from typing import Any

_resolve = socket.getaddrinfo


def _offline(host: Any, *args: Any, **kwargs: Any) -> Any:
    name = host.decode() if isinstance(host, bytes) else host
    if name is None or name == "localhost" or _literal(name):
        return _resolve(host, *args, **kwargs)
    raise socket.gaierror(socket.EAI_NONAME, f"{name} is not looked up in this test")


def _literal(name: str) -> bool:
    try:
        ipaddress.ip_address(name.strip("[]"))
    except ValueError:
        return False
    return True


socket.getaddrinfo = _offline
sys.modules["uvloop"] = None  # type: ignore[assignment]

if __name__ == "__main__":
    from app.__main__ import main

    sys.exit(main(sys.argv[1:]))
