"""Start a process that dies with the one that started it, however that one dies.

Linux's parent-death signal (`prctl(PR_SET_PDEATHSIG)`) is sent to a process when the thread
that forked it ends, `kill -9` included, and it survives `exec`. Python's subprocess can set
it only from `preexec_fn`, which is unsafe in a process with threads (serve has some), so the
command is started through a few lines of Python that set it and then exec the command: the
process keeps its pid, and its command line is the command's. If the parent is already gone
when the signal is set, the command is not run. Elsewhere than Linux the command just runs.
"""

from __future__ import annotations

import os
import signal
import sys

_SET_AND_EXEC = """\
import ctypes, os, sys
try:
    ctypes.CDLL(None, use_errno=True).prctl(1, int(sys.argv[1]), 0, 0, 0)  # PR_SET_PDEATHSIG
except AttributeError:
    pass
if os.getppid() != int(sys.argv[2]):
    os._exit(1)  # the parent died before the signal was set
os.execvp(sys.argv[3], sys.argv[3:])
"""


def dying_with_me(command: list[str], *, signum: int = signal.SIGKILL) -> list[str]:
    """`command`, started so that it gets `signum` when this process (the thread that starts
    it: serve starts its services from its main thread only) ends."""
    return [
        sys.executable,
        "-I",
        "-S",
        "-c",
        _SET_AND_EXEC,
        str(int(signum)),
        str(os.getpid()),
        *command,
    ]
