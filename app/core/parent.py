"""A child process that must not outlive its parent: the supervisor's worker processes and the API processes of
`api --processes N`. On Linux the kernel signals the child when its parent dies, SIGKILL included; an API
process also watches its parent's pid (the only way elsewhere), and exits at the end of its shutdown grace
whatever a graceful stop still waits for (a long request, an open connection)."""

import contextlib
import ctypes
import os
import signal
import sys
import threading
import time

PR_SET_PDEATHSIG = 1
PARENT_PID = "TASKQ_PARENT_PID"  # set by a parent for children that cannot take a preexec function
WATCH_SECONDS = 0.5


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    """Ask the kernel for `signum` once the parent is gone (Linux; nothing elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signum)


def remember_parent() -> None:
    """In a parent: let the children it starts from now on check that they are still its children."""
    os.environ[PARENT_PID] = str(os.getpid())


def stay_with_parent(grace: float, signum: int = signal.SIGTERM) -> None:
    """In a child started after `remember_parent`: `signum` when the parent dies, and exit at once if it died
    before this child could ask (the child then already belongs to another process). A thread watches the
    parent too: once it is gone, `signum`, and `grace` seconds later the process ends however its stop went."""
    expected = os.environ.get(PARENT_PID)
    die_with_parent(signum)
    if not (expected and expected.isdigit()):
        return
    if os.getppid() != int(expected):
        os._exit(1)
    watch = threading.Thread(target=_end_with, args=(int(expected), grace, signum), name="parent-watch", daemon=True)
    watch.start()


def _end_with(parent: int, grace: float, signum: int) -> None:
    while os.getppid() == parent:
        time.sleep(WATCH_SECONDS)
    os.kill(os.getpid(), signum)  # a graceful stop first (the kernel may have asked already: the same signal)
    time.sleep(grace)
    os._exit(1)
