"""A child process that must not outlive its parent: the supervisor's worker processes and the API processes of
`api --processes N`. On Linux the kernel signals the child when its parent dies, SIGKILL included; elsewhere
(no prctl) a child can outlive a killed parent."""

import contextlib
import ctypes
import os
import signal
import sys

PR_SET_PDEATHSIG = 1
PARENT_PID = "TASKQ_PARENT_PID"  # set by a parent for children that cannot take a preexec function


def die_with_parent(signum: int = signal.SIGKILL) -> None:
    """Ask the kernel for `signum` once the parent is gone (Linux; nothing elsewhere)."""
    if not sys.platform.startswith("linux"):
        return
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signum)


def remember_parent() -> None:
    """In a parent: let the children it starts from now on check that they are still its children."""
    os.environ[PARENT_PID] = str(os.getpid())


def stay_with_parent(signum: int = signal.SIGTERM) -> None:
    """In a child started after `remember_parent`: `signum` when the parent dies, and exit at once if it died
    before this child could ask (the child then already belongs to another process)."""
    expected = os.environ.get(PARENT_PID)
    die_with_parent(signum)
    if expected and expected.isdigit() and os.getppid() != int(expected):
        os._exit(1)
