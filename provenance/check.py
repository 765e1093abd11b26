"""Compliance check of a results file: complete provenance of the right types on every row."""

from __future__ import annotations

import json
from pathlib import Path

import pandas as pd
import pyarrow.parquet as pq

from provenance.canonical import config_hash
from provenance.results import read_results
from provenance.schema import FIELDS, METADATA_KEY, SCHEMA_VERSION, column

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


def check_results(path: str | Path) -> tuple[int, list[str]]:
    """(row count, findings); raises UnreadableResults when the file cannot be read."""
    path = Path(path)
    df = read_results(path)
    findings = _type_findings(df)
    if not findings:
        findings = _value_findings(df)
    return len(df), findings + _metadata_findings(path)
