"""Compliance check of a results file: complete provenance of the right types on every row,
and how each run ended (provenance.stop_reasons) on every row of a file that records it (one
written before stop reasons has none, and reads as complete)."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from provenance.canonical import config_hash
from provenance.results import read_results
from provenance.schema import FIELDS, METADATA_KEY, RUN_KEY, SCHEMA_VERSION, column
from provenance.stop_reasons import (
    ITERATION_COLUMN,
    REASON_COLUMN,
    RECORD_KEY,
    ROW_REASONS,
    STOP_REASONS,
    UnknownStopReason,
    record_stops,
)

_DTYPE_CHECKS = {
    int: pd.api.types.is_integer_dtype,
    bool: pd.api.types.is_bool_dtype,
    str: lambda dtype: pd.api.types.is_string_dtype(dtype) or pd.api.types.is_object_dtype(dtype),
}


def _rows(mask: pd.Series) -> str:
    rows = list(mask[mask].index)
    shown = ", ".join(map(str, rows[:5]))
    return f"row {shown}" if len(rows) == 1 else f"rows {shown}{', ...' if len(rows) > 5 else ''}"


def _type_findings(df: pd.DataFrame) -> list[str]:
    findings = []
    for field, (kind, _) in FIELDS.items():
        name = column(field)
        if name not in df.columns:
            findings.append(f"column '{name}' is missing")
            continue
        values = df[name]
        if values.isna().any():
            findings.append(f"column '{name}' is empty on {_rows(values.isna())}")
        elif not _DTYPE_CHECKS[kind](values.dtype) or (
                kind is str and not values.map(lambda v: isinstance(v, str)).all()):
            findings.append(f"column '{name}' must hold {kind.__name__} values, "
                            f"found {values.dtype}")
    return findings


def _value_findings(df: pd.DataFrame) -> list[str]:
    findings = []
    version = df[column("schema_version")]
    if (version != SCHEMA_VERSION).any():
        findings.append(f"schema version must be {SCHEMA_VERSION} on every row, found "
                        f"{sorted(set(version))} on {_rows(version != SCHEMA_VERSION)}")
    incomplete = ~df[column("complete")].astype(bool)
    if incomplete.any():
        missing = sorted(set(df.loc[incomplete, column("missing")]))
        findings.append(f"incomplete provenance on {_rows(incomplete)} "
                        f"(could not read: {'; '.join(missing)})")
    recomputed = df[column("config_json")].map(config_hash)
    tampered = recomputed != df[column("config_hash")]
    if tampered.any():
        findings.append(f"config hash does not match the stored config on {_rows(tampered)}")
    return findings


def _metadata_findings(path: Path) -> list[str]:
    metadata = pq.read_metadata(path).metadata or {}
    if METADATA_KEY not in metadata:
        return [f"file metadata has no '{METADATA_KEY.decode()}' record"]
    try:
        document = json.loads(metadata[METADATA_KEY])
    except ValueError:
        return [f"file metadata '{METADATA_KEY.decode()}' is not valid JSON"]
    if document.get("schema_version") != SCHEMA_VERSION:
        return [f"file metadata schema version is {document.get('schema_version')!r}, "
                f"expected {SCHEMA_VERSION}"]
    return []


def _stop_findings(df: pd.DataFrame, path: Path) -> list[str]:
    """A file whose rows or run status record stop reasons needs one on every row, from the
    vocabulary, with the iteration it stopped at; its run status's reasons too."""
    metadata = pq.read_metadata(path).metadata or {}
    try:
        record = json.loads(metadata[RUN_KEY]) if RUN_KEY in metadata else {}
    except ValueError:
        return [f"file metadata '{RUN_KEY.decode()}' is not valid JSON"]
    if REASON_COLUMN not in df and RECORD_KEY not in record:
        return []  # written before stop reasons: complete, as it reads
    findings = [f"column '{name}' is missing" for name in (REASON_COLUMN, ITERATION_COLUMN)
                if name not in df]
    if not findings:
        empty = df[REASON_COLUMN].isna() | df[ITERATION_COLUMN].isna()
        if empty.any():
            findings.append(f"no stop reason or stop iteration on {_rows(empty)}")
        unknown = df[REASON_COLUMN].notna() & ~df[REASON_COLUMN].isin(ROW_REASONS)
        if unknown.any():
            findings.append(f"column '{REASON_COLUMN}' must hold one of "
                            f"{', '.join(ROW_REASONS)}; found "
                            f"{sorted(set(df.loc[unknown, REASON_COLUMN].map(str)))} on "
                            f"{_rows(unknown)}")
    try:
        record_stops(record)
    except UnknownStopReason as error:
        findings.append(f"run status '{RECORD_KEY}': {error}")
    except (AttributeError, TypeError, ValueError):
        findings.append(f"run status '{RECORD_KEY}' must map each experiment to its reason "
                        f"({', '.join(STOP_REASONS)}) and iteration")
    return findings


def check_results(path: str | Path) -> tuple[int, list[str]]:
    """(row count, findings); raises UnreadableResults when the file cannot be read."""
    path = Path(path)
    df = read_results(path)
    findings = _type_findings(df)
    if not findings:
        findings = _value_findings(df)
    return len(df), findings + _stop_findings(df, path) + _metadata_findings(path)
