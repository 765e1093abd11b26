"""Canonical JSON of an experiment and its hash."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any


def _normalise(value: Any) -> Any:
    if isinstance(value, dict):
        return {str(k): _normalise(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_normalise(v) for v in value]
    if isinstance(value, float) and not math.isfinite(value):
        raise ValueError(f"canonical JSON cannot hold the non-finite number {value}")
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"canonical JSON cannot hold a {type(value).__name__}: {value!r}")


def canonical_json(config: dict) -> str:
    """Sorted keys, no spaces, shortest round-trip floats: equal configs give equal text."""
    return json.dumps(_normalise(config), sort_keys=True, separators=(",", ":"),
                      ensure_ascii=True, allow_nan=False)


def config_hash(config_json: str) -> str:
    return hashlib.sha256(config_json.encode("utf-8")).hexdigest()
