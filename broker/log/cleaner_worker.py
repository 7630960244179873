"""The log cleaner's worker: a process of its own (`python -m broker.log.cleaner_worker <broker pid>`), so that
decoding and re-encoding records never takes the broker's GIL from the event loop.

It serves one `broker.log.clean.CleaningSession` at a time over its stdin/stdout pipes (pickled messages framed
by `multiprocessing.connection.Connection`): ("begin", CleanJob) -> Plan, ("clean", group index) -> GroupResult,
("end",) -> None. Answers are ("ok", value) or ("error", kind, message). It dies with the broker: the kernel
sends it SIGKILL when the broker exits (PR_SET_PDEATHSIG), and it checks its parent while it works, so no orphan
keeps writing `.cleaned` files into a log directory after a broker restart.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import sys
from multiprocessing.connection import Connection

from broker.log.clean import CleaningSession

_PR_SET_PDEATHSIG = 1


def _die_with_parent(parent: int) -> None:
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    except (OSError, AttributeError):  # not Linux: the parent check below still stops it
        pass
    if os.getppid() != parent:
        os._exit(0)


class _ParentGone(BaseException):
    pass


def serve(reader: Connection, writer: Connection, parent: int) -> None:
    calls = 0

    def check() -> None:
        nonlocal calls
        calls += 1
        if calls % 64 == 0 and os.getppid() != parent:
            raise _ParentGone()

    session: CleaningSession | None = None
    while True:
        try:
            message = reader.recv()
        except (EOFError, OSError):
            return
        kind = message[0]
        try:
            if kind == "begin":
                session = CleaningSession(message[1], check=check)
                result: object = session.build_map()
            elif kind == "clean":
                if session is None:
                    raise RuntimeError("no cleaning in progress")
                result = session.clean_group(message[1])
            elif kind == "end":
                session, result = None, None
            else:
                raise RuntimeError(f"unknown request {kind!r}")
        except _ParentGone:
            return
        except Exception as err:  # noqa: BLE001 - reported to the broker, which logs it
            session = None
            writer.send(("error", type(err).__name__, str(err)))
            continue
        writer.send(("ok", result))


def main() -> None:
    parent = int(sys.argv[1])
    _die_with_parent(parent)
    reader = Connection(os.dup(0), writable=False)
    writer = Connection(os.dup(1), readable=False)
    os.dup2(2, 1)  # a stray print must not corrupt the answers
    with contextlib.suppress(KeyboardInterrupt):  # the broker's terminal got ^C too: the broker ends the work
        serve(reader, writer, parent)


if __name__ == "__main__":
    main()
