"""Reading and publishing results parquet files safely.

Reading never unpickles: benchopt stores non-scalar parameters as pickled (or safetensors)
blobs behind a marker; such a value is refused with an error naming its column.
"""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq

from provenance.files import atomic_path
from provenance.schema import BENCHOPT_PREFIX, COLUMN_PREFIX, METADATA_KEY, SCHEMA_VERSION

BENCHOPT_COLUMNS = ("solver_name", "dataset_name", "objective_name", "stop_val", "idx_rep")
ENCODED_MARKERS = (b"\x00benchopt-pkl\x00", b"\x00benchopt-st\x00")


class UnreadableResults(Exception):
    """The file is not a readable results parquet (truncated, not parquet, another tool)."""


def read_table(path: Path) -> pa.Table:
    return _read(path, pq.read_table)


def read_schema(path: Path) -> pa.Schema:
    """The schema (and metadata) of a parquet file, without reading its rows."""
    return _read(path, pq.read_schema)


def read_row_count(path: Path) -> int:
    """The number of rows of a parquet file, from its footer."""
    return _read(path, lambda source: pq.read_metadata(source).num_rows)


def _read(path: Path, reader):
    """``reader(path)``; a missing or unreadable file is an UnreadableResults naming it."""
    try:
        return reader(path)
    except FileNotFoundError:
        raise UnreadableResults(f"{path}: no such file") from None
    except (pa.ArrowException, OSError) as error:
        first_line = str(error).splitlines()[0] if str(error) else type(error).__name__
        raise UnreadableResults(f"{path}: not a readable parquet file ({first_line})") from None


def _refuse_encoded(table: pa.Table, path: Path) -> None:
    for name, column_type in zip(table.column_names, table.schema.types, strict=True):
        if not (pa.types.is_binary(column_type) or pa.types.is_large_binary(column_type)):
            continue
        for value in table.column(name).to_pylist():
            if isinstance(value, bytes) and value.startswith(ENCODED_MARKERS):
                raise UnreadableResults(
                    f"{path}: column '{name}' holds an encoded (pickled) object; scalebench "
                    f"never unpickles results and only reads plain scalar values")


def read_results(path: str | Path) -> pd.DataFrame:
    """A benchopt results file as a DataFrame, provenance columns named ``prov_*``."""
    path = Path(path)
    table = read_table(path)
    missing = [c for c in BENCHOPT_COLUMNS if c not in table.column_names]
    if missing:
        raise UnreadableResults(f"{path}: not a benchopt results file (no column "
                                f"'{missing[0]}')")
    _refuse_encoded(table, path)
    return rename_provenance(table).to_pandas()


def rename_provenance(table: pa.Table) -> pa.Table:
    """``objective_prov_*`` (benchopt's prefix) becomes ``prov_*``."""
    names = [COLUMN_PREFIX + n[len(BENCHOPT_PREFIX):] if n.startswith(BENCHOPT_PREFIX) else n
             for n in table.column_names]
    return table.rename_columns(names)


def distinct_records(table: pa.Table) -> list[dict]:
    """The distinct provenance records of a table, without the per-row result digest."""
    fields = [n for n in table.column_names
              if n.startswith(COLUMN_PREFIX) and n != COLUMN_PREFIX + "result_sha256"]
    frame = table.select(fields).to_pandas().drop_duplicates()
    return json.loads(frame.to_json(orient="records"))


def write_atomically(table: pa.Table, path: Path) -> None:
    """Write next to ``path`` then rename: readers see the old file or the new one."""
    with atomic_path(path) as temporary:
        pq.write_table(table, temporary)


def finalize(path: Path) -> None:
    """Rename provenance columns and store the full records in the file's metadata."""
    table = rename_provenance(read_table(path))
    document = {"schema_version": SCHEMA_VERSION, "records": distinct_records(table)}
    metadata = {**(table.schema.metadata or {}), METADATA_KEY: json.dumps(document).encode()}
    write_atomically(table.replace_schema_metadata(metadata), path)
