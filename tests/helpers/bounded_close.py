"""A bounded close for confluent_kafka.ShareConsumer in tests: a test must fail by its own deadline, not hang.

ShareConsumer.close() takes no timeout. librdkafka 2.16.0's close waits for every partition of the group
assignment to leave, and an assignment whose heartbeat response arrived just before close() is applied after
the close began: its partitions never leave, and close() never returns (seen with `debug=cgrp`: "waiting for
3 toppar(s) ... before terminating" once a second, forever). Close only consumers whose assignment was applied
(`share_consumers.poll_until_served`), and close them with `close_within`.
"""

from __future__ import annotations

import threading
from typing import Protocol

import pytest


class Closable(Protocol):
    def close(self) -> None: ...


# librdkafka documents close as bounded by about socket.timeout.ms (60 s by default); past that it is stuck.
CLOSE_TIMEOUT_S = 90.0


def close_within(consumer: Closable, timeout: float = CLOSE_TIMEOUT_S) -> None:
    """consumer.close(), failing the test if it has not returned after `timeout` seconds. The close runs in a
    daemon thread: a stuck one is left behind (it holds no lock of ours) and cannot keep the interpreter up."""
    errors: list[BaseException] = []

    def run() -> None:
        try:
            consumer.close()
        except BaseException as err:  # noqa: BLE001 - handed to the test's thread
            errors.append(err)

    closer = threading.Thread(target=run, name="share-consumer-close", daemon=True)
    closer.start()
    closer.join(timeout)
    if closer.is_alive():
        pytest.fail(f"ShareConsumer.close() did not return within {timeout:.0f} s (librdkafka waits for its "
                    "share-session leaves and for every assigned partition to leave; an assignment applied "
                    "after close began never leaves)", pytrace=False)
    if errors:
        raise errors[0]
