"""Parameter specifications: one declaration gives benchopt's defaults and the validation rules.

Each benchmark class declares ``parameters = benchopt_parameters(SPECS)`` and validates the
values it receives with ``validate_parameters``; ``scalebench run`` applies the same checks to a
whole configuration file before anything runs, so a mistake never surfaces after hours of work.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from scalebench.errors import ConfigError, warn_once

_KIND_NAMES = {int: "an integer", float: "a number", str: "a string", bool: "a boolean"}


@dataclass(frozen=True)
class Param:
    """One parameter: its default, its type and the values it may take."""

    default: Any
    kind: type
    choices: tuple | None = None
    minimum: float | None = None
    maximum: float | None = None
    nullable: bool = False  # whether ``null`` (None) is an allowed value
    doc: str = ""
    # The minimum itself is refused (a gain in (0, 1], a positive scale).
    exclusive_minimum: bool = False
    # Left out of a run's recorded parameters (its config and hash) while it holds its
    # default: an unset SLURM resource, or a parameter added after results were archived
    # (step_scale, a dataset's image), whose runs that leave it so keep their hashes
    # (``recorded_parameters``).
    omitted_at_default: bool = False

    def describe(self) -> str:
        if self.choices is not None:
            return "one of " + ", ".join(repr(c) for c in self.choices)
        text = _KIND_NAMES[self.kind]
        if self.minimum is not None:
            text += f" {'>' if self.exclusive_minimum else '>='} {self.minimum}"
        if self.maximum is not None:
            text += f" <= {self.maximum}"
        if self.nullable:
            text += " or null"
        return text


def _coerce(value: Any, spec: Param) -> Any:
    """Return ``value`` as ``spec.kind``, or raise ValueError when it is not of that type."""
    if value is None and spec.nullable:
        return None
    if spec.kind is bool:
        if isinstance(value, bool):
            return value
        raise ValueError
    if isinstance(value, bool):  # bool is an int subclass: never accept it for numbers
        raise ValueError
    if spec.kind is int and isinstance(value, int):
        return value
    if spec.kind is float and isinstance(value, int | float):
        return float(value)
    if spec.kind is str and isinstance(value, str):
        return value
    raise ValueError


def check_value(owner: str, key: str, value: Any, spec: Param) -> Any:
    """Validate one value; ``owner`` names the component, e.g. "solver 'pnp'"."""
    try:
        coerced = _coerce(value, spec)
    except ValueError:
        raise ConfigError(
            f"{owner}: parameter '{key}' must be {spec.describe()}, "
            f"got {value!r} ({type(value).__name__})"
        ) from None
    if coerced is None:
        return None
    if isinstance(coerced, float) and not math.isfinite(coerced):
        raise ConfigError(f"{owner}: parameter '{key}' must be a finite number, got {coerced}")
    bad_choice = spec.choices is not None and coerced not in spec.choices
    too_small = spec.minimum is not None and (
        coerced <= spec.minimum if spec.exclusive_minimum else coerced < spec.minimum)
    too_large = spec.maximum is not None and coerced > spec.maximum
    if bad_choice or too_small or too_large:
        raise ConfigError(f"{owner}: parameter '{key}' must be {spec.describe()}, got {value!r}")
    return coerced


def validate_parameters(owner: str, values: dict, specs: dict[str, Param]) -> dict:
    """Check names and values of ``values`` against ``specs``; return the coerced values."""
    unknown = sorted(set(values) - set(specs))
    if unknown:
        raise ConfigError(
            f"{owner}: unknown parameter '{unknown[0]}' (allowed: {', '.join(sorted(specs))})"
        )
    return {key: check_value(owner, key, value, specs[key]) for key, value in values.items()}


def renamed_parameters(owner: str, values: dict, renamed: dict[str, str]) -> dict:
    """``values`` with each old name of ``renamed`` (old -> new) given its new one; one
    warning per process, owner and old name, on stderr. A value under both names is an error.
    Keys of benchopt's zipped form ("a, b") are renamed part by part."""
    result = {}
    for key, value in values.items():
        parts = [part.strip() for part in key.split(",")]
        new_parts = [renamed.get(part, part) for part in parts]
        for old, new in zip(parts, new_parts, strict=True):
            if old != new:
                warn_once(("renamed", owner, old), f"{owner}: parameter '{old}' is now "
                          f"'{new}'; the old name still works for now")
        new_key = ", ".join(new_parts) if len(parts) > 1 else new_parts[0]
        if new_key in result:
            raise ConfigError(f"{owner}: parameter '{new_key}' is given twice (once under its "
                              f"old name); give it once, as '{new_key}'")
        result[new_key] = value
    return result


def benchopt_parameters(specs: dict[str, Param]) -> dict[str, list]:
    """benchopt's ``parameters`` class attribute: each parameter with its default as a grid."""
    return {key: [spec.default] for key, spec in specs.items()}


def resolved_parameters(values: dict, specs: dict[str, Param]) -> dict:
    """Defaults completed by ``values``: every parameter the component will use."""
    return {key: values.get(key, spec.default) for key, spec in specs.items()}


def omitted(key: str, value: Any, specs: dict[str, Param]) -> bool:
    """Whether ``key`` at ``value`` is left out of a run's record (Param.omitted_at_default)."""
    return key in specs and specs[key].omitted_at_default and value == specs[key].default


def recorded_parameters(values: dict, specs: dict[str, Param]) -> dict:
    """``values`` without the parameters a run's record leaves out at their default: what its
    config and hash hold."""
    return {key: value for key, value in values.items() if not omitted(key, value, specs)}
