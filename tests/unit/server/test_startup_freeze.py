"""`python -m broker` freezes the imported modules for the garbage collector before it builds the broker (issue 37:
the collection before the listeners open then walks only what the start built). Run in a child interpreter, gc's
permanent generation being per process; the Broker there is a stand-in that records what is frozen when it is built
and fails its start, so serve() returns without opening anything."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[3]

CHILD = """
import asyncio, gc, tempfile
import broker.__main__ as main
import broker.app

frozen = []

class StandIn:
    def __init__(self, *args, **kwargs):
        frozen.append(gc.get_freeze_count())
        self.failed = asyncio.Event()

    async def start(self):
        raise OSError("stand-in: not started")

    async def stop(self):
        pass

broker.app.Broker = StandIn
data = tempfile.mkdtemp()
rc = asyncio.run(main.serve(main.parse_args(["--override", f"log.dirs={data}", "--log-level", "error"])))
print(rc, frozen[0])
"""


def test_serve_freezes_the_imports_before_building_the_broker():
    out = subprocess.run([sys.executable, "-c", CHILD], cwd=ROOT, capture_output=True, text=True, timeout=120,
                         check=True).stdout.split()
    rc, frozen = int(out[-2]), int(out[-1])
    assert rc == 1  # the stand-in's start failed: serve stopped there
    assert frozen > 10_000  # the modules, classes and functions of the imports (tens of thousands of objects)
