"""The cyclic garbage collector's full passes stay short: what exists once the broker has started is frozen.

CPython's collector walks every tracked object in a full (generation 2) pass, on the loop's thread, while nothing
else runs. Right after start the heap holds the imported modules, the compiled codecs of every API version, the
config definitions and the replayed state: a few hundred thousand objects that live as long as the process, and a
full pass over them took 100 to 200 ms on a loaded two-core machine, an event-loop stall each time the state
grew by a quarter (the collector's own rule for when to run a full pass). `gc.freeze()` moves them to the
permanent generation: later passes walk only what was made after start. Objects frozen here that later become
cyclic garbage are not reclaimed, which costs little: they are the start's long-lived structures.
"""

from __future__ import annotations

import gc
import time

import structlog

log = structlog.get_logger(__name__)


def freeze_imports() -> None:
    """Freeze what the imports built (modules, classes, functions, the codec tables), without a collection: the
    imports leave next to no cyclic garbage, and the collection `freeze_startup_heap` runs at the end of the start
    then walks only what the start built, not the whole heap again."""
    gc.freeze()


def freeze_startup_heap() -> None:
    """Collect once, then move every surviving object to the permanent generation (`gc.freeze`)."""
    started = time.perf_counter()
    gc.collect()
    gc.freeze()
    log.info("startup heap frozen for the garbage collector", objects=gc.get_freeze_count(),
             seconds=round(time.perf_counter() - started, 3))
