"""The order runs are listed in, in every view: by configuration, then by ranks."""

from __future__ import annotations

import pandas as pd

from scalebench.results.report.data import configuration_columns

WORLD = "prov_world_size"


def reading_order(table: pd.DataFrame, rows: pd.DataFrame) -> pd.DataFrame:
    """Runs (``per_run`` rows) sorted by configuration, then by ranks, so that
    the runs of one configuration on each world size sit together."""
    keys = [c for c in configuration_columns(rows) if c in table] + \
        [c for c in (WORLD, "idx_rep") if c in table]
    if not keys:
        return table

    def order(column: pd.Series) -> pd.Series:  # numbers ascending, names as first seen
        if pd.api.types.is_numeric_dtype(column) and not pd.api.types.is_bool_dtype(column):
            return column
        seen = {value: rank for rank, value in enumerate(dict.fromkeys(column.astype(str)))}
        return column.astype(str).map(seen)

    return table.sort_values(keys, kind="stable", key=order)
