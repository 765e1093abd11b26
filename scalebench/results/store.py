"""The results store: the results parquet ``scalebench run`` publishes, experiment by experiment.

``publish`` merges finished experiments (benchopt's parquet of each, its provenance columns
renamed ``prov_*``, an ``experiment_id`` column added) into the final file atomically, keeping
the rows already there, with the provenance records and the run status in the file's
metadata; ``run_status`` reads that status back (``--resume``, the report). The run status
names how each experiment ended (``provenance.stop_reasons``): a finished one as its rows say,
a failed or stopped one as the launcher says.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa

from provenance.results import (
    distinct_records,
    read_schema,
    read_table,
    rename_provenance,
    write_atomically,
)
from provenance.schema import METADATA_KEY, RUN_KEY, SCHEMA_VERSION
from provenance.stop_reasons import (
    COMPLETE,
    ITERATION_COLUMN,
    REASON_COLUMN,
    RECORD_KEY,
    STOP_COLUMNS,
    Stop,
)
from scalebench.results.stops import stops_by

EXPERIMENT_COLUMN = "experiment_id"
# The run status's per-experiment time limits (planning.plan_time.launch_time_checks):
# timeout_s, predicted_s and advised_timeout_s (None where not calibrated).
TIME_LIMITS_KEY = "time_limits"
# The run status's record of the job's requeues by the launcher (scalebench.launch.requeue:
# job, count, limit, the nodes excluded and why each was done); absent in files of launches
# that never requeued themselves.
REQUEUES_KEY = "requeues"


def run_status(path: Path) -> dict:
    """The run status ``publish`` stored in a results file: status (partial, complete),
    finished experiments, failures, config, stops ({} for files ``scalebench run`` did not
    write; provenance.stop_reasons.record_stops reads the stops of older ones)."""
    return _status(read_schema(path).metadata)


def _status(metadata: dict | None) -> dict:
    metadata = metadata or {}
    return json.loads(metadata[RUN_KEY]) if RUN_KEY in metadata else {}


def publish(final: Path, parts: list[tuple[str, Path]], status: str, failures: list[dict],
            config: str, unfinished: dict[str, Stop] | None = None,
            tuned: dict | None = None, time_limits: dict[str, dict] | None = None,
            requeues: dict | None = None) -> int:
    """Merge ``parts`` (experiment id, benchopt parquet) into ``final``; return its rows.
    ``unfinished``: how the experiments of this launch that kept no rows ended (failed,
    stopped); ``tuned``: the config's ``tuned`` record (its settings' studies), kept in the
    run status so that the report says where the settings came from; ``time_limits``: per
    experiment, its timeout and the one its predicted run needs (``TIME_LIMITS_KEY``: what
    the closing line names for a run its timeout cut), kept with those already there;
    ``requeues``: the job's requeues by the launcher (``REQUEUES_KEY``), else those already
    there."""
    tables, done, limits = [], [], {}
    if final.is_file():
        existing = read_table(final)
        tables.append(existing.replace_schema_metadata(None))
        before = _status(existing.schema.metadata)
        done, limits = list(before.get("experiments", [])), before.get(TIME_LIMITS_KEY, {})
        requeues = requeues or before.get(REQUEUES_KEY)
    for identifier, part in parts:
        table = rename_provenance(read_table(part))
        tables.append(table.append_column(EXPERIMENT_COLUMN,
                                          pa.array([identifier] * table.num_rows)))
        done.append(identifier)
    table = _complete_old_rows(pa.concat_tables(tables, promote_options="permissive"))
    stops = {**{key: stop.to_json() for key, stop in (unfinished or {}).items()},
             **{key: stop.to_json() for key, stop in experiment_stops(table).items()}}
    limits = {**limits, **(time_limits or {})}
    record = {"status": status, "experiments": done, "failures": failures, "config": config,
              RECORD_KEY: stops, **({"tuned": tuned} if tuned else {}),
              **({TIME_LIMITS_KEY: limits} if limits else {}),
              **({REQUEUES_KEY: requeues} if requeues else {})}
    return write_results(table, record, final)


def write_results(table: pa.Table, record: dict, final: Path) -> int:
    """``table`` written atomically to ``final`` with its provenance records and the run
    status ``record`` in its metadata (what ``run_status`` reads back); its rows."""
    document = {"schema_version": SCHEMA_VERSION, "records": distinct_records(table)}
    metadata = {METADATA_KEY: json.dumps(document).encode(),
                RUN_KEY: json.dumps(record).encode()}
    write_atomically(table.replace_schema_metadata(metadata), final)
    return table.num_rows


def _complete_old_rows(table: pa.Table) -> pa.Table:
    """Rows written before stop reasons (those of a resumed old file) read as complete at the
    last iteration of their run, as every reader takes them: the merged file then has a
    reason on every row."""
    present = [c for c in STOP_COLUMNS if c in table.column_names]
    frame = table.select([EXPERIMENT_COLUMN, "idx_rep", "stop_val", *present]).to_pandas()
    empty = pd.Series(None, index=frame.index, dtype=object)
    reasons, iterations = (frame[c] if c in frame else empty for c in STOP_COLUMNS)
    old = reasons.isna()
    if not old.any():
        return table
    last = frame.groupby([EXPERIMENT_COLUMN, "idx_rep"])["stop_val"].transform("max")
    filled = {REASON_COLUMN: pa.array(reasons.where(~old, COMPLETE).tolist(), pa.string()),
              ITERATION_COLUMN: pa.array(iterations.where(~old, last).astype("int64").tolist(),
                                         pa.int64())}
    for name, array in filled.items():
        table = table.set_column(table.column_names.index(name), name, array) \
            if name in table.column_names else table.append_column(name, array)
    return table


def experiment_stops(table: pa.Table) -> dict[str, Stop]:
    """How each experiment of a results table ended, from its rows (results.stops)."""
    names = [c for c in (EXPERIMENT_COLUMN, "idx_rep", "stop_val", "p_solver_max_iter",
                         *STOP_COLUMNS) if c in table.column_names]
    return stops_by(table.select(names).to_pandas(), EXPERIMENT_COLUMN)
