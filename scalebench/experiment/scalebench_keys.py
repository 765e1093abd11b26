"""The top-level config keys scalebench reads for itself and benchopt must not see: the one
place they are declared. The config checks accept and check them
(scalebench.experiment.config), the checked values are the Config's ``scalebench``, and
expand leaves them out of every experiment's benchopt config."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from scalebench.errors import ConfigError
from scalebench.param_spec import Param, check_value


@dataclass(frozen=True)
class KeySpec:
    """One scalebench key: its default, what it allows (``describe``, as a Param says it, so
    the docs table them alike) and its check (the value checked, or a one-line ConfigError)."""

    default: Any
    allowed: str
    doc: str
    check: Callable[[str, Any], Any]

    def describe(self) -> str:
        return self.allowed


def _param_check(spec: Param) -> Callable[[str, Any], Any]:
    return lambda key, value: check_value("config", key, value, spec)


def _parameter_mapping(key: str, value: Any) -> dict:
    """A mapping whose keys are parameter names (their values are the key's own reader's)."""
    if not isinstance(value, dict) or not all(isinstance(name, str) and name.strip()
                                              for name in value):
        raise ConfigError(f"config: '{key}' must be a mapping of parameter names to their "
                          f"settings, got {value!r}")
    return value


def _mapping(key: str, value: Any) -> dict:
    if not isinstance(value, dict):
        raise ConfigError(f"config: '{key}' must be a mapping, got {value!r}")
    return value


_RESTART_LIMIT = Param(3, int, minimum=0)
SCALEBENCH_KEYS: dict[str, KeySpec] = {
    # How many times a launch may requeue itself after its job is cut (0: never); expand
    # hands it to the launcher (scalebench.launch.requeue), `run --restart-limit` wins.
    "restart-limit": KeySpec(_RESTART_LIMIT.default, _RESTART_LIMIT.describe(),
                             "how many times a launch may requeue itself",
                             _param_check(_RESTART_LIMIT)),
    # The tuning of solver parameters: parameter name -> its search; the tuning reads the
    # settings, the checks here only that it names parameters.
    "tune": KeySpec(None, "a mapping of parameter names", "parameters to tune and how",
                    _parameter_mapping),
    # Written by `scalebench tune` into the config it tunes: per study, the setting chosen,
    # its trial and the validation images it was chosen on; a config that has it runs test
    # images only (scalebench.experiment.config refuses a validation image).
    "tuned": KeySpec(None, "a mapping written by scalebench tune",
                     "where each tuned setting came from (its study, trial and validation "
                     "images); the config then refuses validation images", _mapping),
}


def check_scalebench_keys(raw: dict, errors: list[str]) -> dict[str, Any]:
    """Every scalebench key's value: the checked one given in ``raw``, else its default; a
    line in ``errors`` for each value refused."""
    values = {}
    for key, spec in SCALEBENCH_KEYS.items():
        if key not in raw:
            values[key] = spec.default
            continue
        try:
            values[key] = spec.check(key, raw[key])
        except ConfigError as error:
            errors.append(str(error))
    return values
