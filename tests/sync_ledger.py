"""Runs `cortex` with a journal that keeps a ledger of what it syncs, so a
test can rebuild a data dir as a power cut would leave it: the journal cut to
the last sync, term and vote as last written durably, everything else as the
crash found it. Each line is written *before* the sync it describes, so a
kill between the two never makes the ledger claim less than was synced.

Use: `python -c "import tests.sync_ledger as s; s.main()" node start ...` with
`CORTEX_TEST_SYNC_LEDGER` naming the ledger file."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

LEDGER_ENV = "CORTEX_TEST_SYNC_LEDGER"
LAUNCHER = ["-c", "import tests.sync_ledger as s; s.main()"]


def _record(line: dict[str, Any]) -> None:
    with open(os.environ[LEDGER_ENV], "a") as ledger:
        ledger.write(json.dumps(line) + "\n")


def install() -> None:
    import cortex.raft.group as group
    import cortex.raft.journal as journal

    write_durably = journal.write_file_durably

    def recorded_write(
        path: str, data: bytes, sync: bool = True, disk: journal.Disk = journal.SYSTEM_DISK
    ) -> None:
        if sync and path.endswith(journal.META_FILE):
            _record({"kind": "meta", "content": data.decode()})
        write_durably(path, data, sync, disk)

    class LedgerJournal(journal.DurableJournal):
        def sync(self) -> None:
            if self.sync_enabled and self.dirty:
                inode = os.fstat(self._fd).st_ino
                _record({"kind": "log", "inode": inode, "length": self._end})
            super().sync()

        def _rewrite_from(self, position: int) -> None:
            raise AssertionError("the ledger does not follow compactions; keep them out of tests")

    journal.write_file_durably = recorded_write
    group.DurableJournal = LedgerJournal


def main() -> None:
    install()
    from cortex.cli.main import main as cortex_main

    sys.exit(cortex_main(sys.argv[1:]))


def rebuild_as_after_power_loss(data_dir: Path, ledger: Path) -> None:
    """Cuts the node's journal back to its last sync and restores its last
    durable term and vote; the state database stays as the crash left it."""
    from cortex.raft.journal import _MAGIC, LOG_FILE, META_FILE

    lines = (
        [json.loads(line) for line in ledger.read_text().splitlines()] if ledger.exists() else []
    )
    logs = [line for line in lines if line["kind"] == "log"]
    metas = [line for line in lines if line["kind"] == "meta"]
    log_path = data_dir / LOG_FILE
    if logs:
        assert os.stat(log_path).st_ino == logs[-1]["inode"], "journal replaced since its last sync"
        os.truncate(log_path, logs[-1]["length"])
    else:
        os.truncate(log_path, len(_MAGIC))
    meta_path = data_dir / META_FILE
    if metas:
        meta_path.write_text(metas[-1]["content"])
    elif meta_path.exists():
        meta_path.unlink()
