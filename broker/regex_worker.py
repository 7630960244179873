"""The regex worker process (`python -m broker.regex_worker`): compiles and matches client-supplied patterns for
the broker (broker/linear_regex.py), so that neither RE2's compilation, which holds the interpreter's lock, nor a
long match takes time from the broker's event loop.

Requests and answers are length-prefixed JSON frames on stdin and stdout. A request: `check` and `resolve`
(patterns), `max_length`, `budget_s`, and either `names` or a `family` with its `version` (the child keeps the
last names sent for a family). The answer maps each pattern to {"error": detail, "costly": bool} or
{"matches": [names]}. The child exits when
its stdin closes (the broker stopped or died).
"""

from __future__ import annotations

import contextlib
import json
import os
import sys

from broker.linear_regex import RegexError, encode_frame, frame_size, match_all

_NICENESS = 19  # the lowest priority: its work is background work


def _read_exactly(stream, n: int) -> bytes | None:
    data = bytearray()
    while len(data) < n:
        chunk = stream.read(n - len(data))
        if not chunk:
            return None
        data += chunk
    return bytes(data)


def serve(stdin, stdout) -> None:
    names_by_family: dict[str, list[str]] = {}
    while (header := _read_exactly(stdin, 4)) is not None:
        body = _read_exactly(stdin, frame_size(header))
        if body is None:
            return
        request = json.loads(body)
        family = request.get("family")
        if "names" in request:
            names = request["names"]
            if family is not None:
                names_by_family[family] = names
        else:
            names = names_by_family[family]
        results = match_all(request["check"], request["resolve"], names, request["max_length"],
                            request.get("budget_s"))
        answer = {pattern: {"error": r.detail, "costly": r.too_costly} if isinstance(r, RegexError)
                  else {"matches": r} for pattern, r in results.items()}
        stdout.write(encode_frame(answer))
        stdout.flush()


def main() -> None:
    with contextlib.suppress(OSError):
        os.nice(_NICENESS)  # the broker wins the CPU when both want it
    serve(sys.stdin.buffer, sys.stdout.buffer)


if __name__ == "__main__":
    main()
