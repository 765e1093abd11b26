"""The results store: the results parquet ``scalebench run`` publishes, experiment by experiment.

``publish`` merges finished experiments (benchopt's parquet of each, its provenance columns
renamed ``prov_*``, an ``experiment_id`` column added) into the final file atomically, keeping
the rows already there, with the provenance records and the run status in the file's
metadata; ``run_status`` reads that status back (``--resume``, the report).
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa

from provenance.results import (
    distinct_records,
    read_schema,
    read_table,
    rename_provenance,
    write_atomically,
)
from provenance.schema import METADATA_KEY, SCHEMA_VERSION

RUN_KEY = b"scalebench.run"  # metadata key of the run status
EXPERIMENT_COLUMN = "experiment_id"


def run_status(path: Path) -> dict:
    """The run status ``publish`` stored in a results file: status (partial, complete),
    finished experiments, failures, config ({} for files ``scalebench run`` did not write)."""
    return _status(read_schema(path).metadata)


def _status(metadata: dict | None) -> dict:
    metadata = metadata or {}
    return json.loads(metadata[RUN_KEY]) if RUN_KEY in metadata else {}


def publish(final: Path, parts: list[tuple[str, Path]], status: str, failures: list[dict],
            config: str) -> int:
    """Merge ``parts`` (experiment id, benchopt parquet) into ``final``; return its rows."""
    tables, done = [], []
    if final.is_file():
        existing = read_table(final)
        tables.append(existing.replace_schema_metadata(None))
        done = list(_status(existing.schema.metadata).get("experiments", []))
    for identifier, part in parts:
        table = rename_provenance(read_table(part))
        tables.append(table.append_column(EXPERIMENT_COLUMN,
                                          pa.array([identifier] * table.num_rows)))
        done.append(identifier)
    table = pa.concat_tables(tables, promote_options="permissive")
    document = {"schema_version": SCHEMA_VERSION, "records": distinct_records(table)}
    record = {"status": status, "experiments": done, "failures": failures, "config": config}
    metadata = {METADATA_KEY: json.dumps(document).encode(),
                RUN_KEY: json.dumps(record).encode()}
    write_atomically(table.replace_schema_metadata(metadata), final)
    return table.num_rows
