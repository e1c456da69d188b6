"""A work for the bench's failure-path tests: ``bench schemas``' :class:`Engine` on the batch pool
(its parent side: notes, timeouts, deaths), its worker side a stand-in whose files named slow*
never finish their first stage."""

from __future__ import annotations

import time
from pathlib import Path

from tokfst_cli.bench.schema_workers import Engine


class SlowEngine(Engine):
    def run(self, path, emit, out):
        if self.one is None:
            self.one = lambda *args: None
            emit({"kind": "setup", "seconds": 0.0})
        while Path(path).name.startswith("slow"):
            time.sleep(0.05)
        return {"status": "compiled"}, None
