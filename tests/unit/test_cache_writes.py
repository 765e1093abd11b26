"""Cache entries written by several writers at once (ranks, two calibrations of one
configuration): each writer goes through a temporary file of its own, so every write
succeeds and the entry left is one writer's whole record."""

from __future__ import annotations

import json
import threading

from scalebench.planning.capacity.calibration_cache import write_entry

WRITERS, WRITES = 4, 200


def test_concurrent_writers_of_one_calibration_entry_all_succeed(tmp_path):
    path = tmp_path / "calibrations" / "entry.json"
    errors: list[BaseException] = []
    records = [{"writer": w, "probes": list(range(50))} for w in range(WRITERS)]

    def write(record: dict) -> None:
        try:
            for _ in range(WRITES):
                write_entry(path, record)
        except BaseException as error:  # noqa: BLE001 - reported by the assertion below
            errors.append(error)

    threads = [threading.Thread(target=write, args=(record,)) for record in records]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
    assert json.loads(path.read_text()) in records
    assert [p.name for p in path.parent.iterdir()] == ["entry.json"]  # no temporary left
