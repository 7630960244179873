"""Hostile HTTP clients for listener-hardening tests, run as a process of their own (so their CPU and GIL are not the
test's): `python -m tests.helpers.http_flood MODE PORT`, stopped with SIGTERM, after which it prints one JSON line
of counters.

- `headers`: one connection at a time sends a request head that never ends (unique header lines, up to 12 MB/s)
  until the server closes it, then reconnects.
- `connections`: keeps `CONNECTIONS` idle connections open, reopening those the server closes.
- `slowloris`: keeps `SLOW` connections open, each sending a request head one byte a second.
"""

from __future__ import annotations

import json
import os
import selectors
import signal
import socket
import sys
import time

CONNECTIONS = 200
SLOW = 40


class Flood:
    def __init__(self, port: int) -> None:
        self.port = port
        self.stopping = False
        self.counters = {"opened": 0, "closed_by_server": 0, "refused": 0, "bytes_sent": 0}

    def connect(self) -> socket.socket | None:
        try:
            s = socket.create_connection(("127.0.0.1", self.port), timeout=5)
        except OSError:
            self.counters["refused"] += 1
            time.sleep(0.05)
            return None
        self.counters["opened"] += 1
        return s

    def headers(self) -> None:
        # Built once (the flood's own CPU must not be what slows the producer); unique within a connection.
        lines = b"".join(b"X-Flood-%d: %s\r\n" % (k, b"v" * 64) for k in range(8192))
        chunk_bytes = 64 * 1024
        while not self.stopping:
            s = self.connect()
            if s is None:
                continue
            try:
                s.sendall(b"GET /metrics HTTP/1.1\r\nHost: x\r\n")
                pos = 0
                while not self.stopping:
                    chunk = lines[pos:pos + chunk_bytes]
                    pos = (pos + chunk_bytes) % len(lines)
                    s.sendall(chunk)
                    self.counters["bytes_sent"] += len(chunk)
                    time.sleep(0.005)  # up to about 12 MB/s, in few large writes
            except OSError:
                self.counters["closed_by_server"] += 1
            finally:
                s.close()
            time.sleep(0.01)  # one client reconnecting, not a connection storm

    def _hold(self, count: int, trickle: bool) -> None:
        sel = selectors.DefaultSelector()
        open_: dict[socket.socket, int] = {}
        last_trickle = 0.0
        while not self.stopping:
            while len(open_) < count and not self.stopping:
                s = self.connect()
                if s is None:
                    break
                s.setblocking(False)
                sel.register(s, selectors.EVENT_READ)
                open_[s] = 0
            for key, _ in sel.select(timeout=0.2):
                s = key.fileobj  # readable: a 503, an error response or EOF; the server is done with it
                sel.unregister(s)
                open_.pop(s, None)
                s.close()
                self.counters["closed_by_server"] += 1
            now = time.monotonic()
            if trickle and now - last_trickle >= 1.0:
                last_trickle = now
                head = b"GET /metrics HTTP/1.1\r\nX-Slow: " + b"a" * 10_000
                for s, sent in list(open_.items()):
                    try:
                        s.send(head[sent:sent + 1] or b"a")
                        open_[s] = sent + 1
                        self.counters["bytes_sent"] += 1
                    except OSError:
                        pass
        for s in open_:
            s.close()

    def run(self, mode: str) -> None:
        if mode == "headers":
            self.headers()
        elif mode == "connections":
            self._hold(CONNECTIONS, trickle=False)
        elif mode == "slowloris":
            self._hold(SLOW, trickle=True)
        else:
            raise SystemExit(f"unknown mode {mode}")


def main() -> None:
    mode, port = sys.argv[1], int(sys.argv[2])
    # Below the broker and the test's clients in CPU priority: on a busy test machine the flood's own CPU would
    # otherwise be what slows a producer, not the broker's handling of it.
    os.nice(10)
    flood = Flood(port)

    def stop(*_args: object) -> None:
        flood.stopping = True

    signal.signal(signal.SIGTERM, stop)
    flood.run(mode)
    print(json.dumps({"mode": mode, **flood.counters}), flush=True)


if __name__ == "__main__":
    main()
