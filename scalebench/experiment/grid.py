"""A config's grid as written: its entries parsed into components (a name and a list of
values per parameter) in benchopt's config format, before any name or value is checked
(scalebench.experiment.config validates them).

An entry is a bare name, ``name[parameter=value,...]`` or ``name: {parameter: value-or-list}``;
a missing section means all of the benchmark's datasets or solvers.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any

from scalebench.errors import ConfigError


@dataclass
class Component:
    """One entry of a list: a name and its parameter grid (every value a list)."""

    name: str
    grid: dict[str, list] = field(default_factory=dict)

    def combinations(self) -> list[dict]:
        """Every parameter combination; a key "a, b" zips its values (benchopt's syntax)."""
        keys = list(self.grid)
        combos = []
        for values in itertools.product(*self.grid.values()):
            combo = {}
            for key, value in zip(keys, values, strict=True):
                names = [name.strip() for name in key.split(",")]
                if len(names) == 1:
                    combo[key] = value
                    continue
                if not isinstance(value, list | tuple) or len(value) != len(names):
                    raise ConfigError(f"'{key}': each value must be a list of {len(names)} "
                                      f"values (one per name), got {value!r}")
                combo.update(zip(names, value, strict=True))
            combos.append(combo)
        return combos


def bracketed(section: str, entry: str) -> Component:
    """'name' or benchopt's 'name[parameter=value,...]' form, parsed as benchopt parses it
    (benchopt, a second of imports, is loaded only for the bracketed form)."""
    if "[" not in entry:
        return Component(entry.strip())
    from benchopt.utils.parametrized_name_mixin import _extract_options

    try:
        name, positional, grid = _extract_options(entry)
    except (ValueError, SyntaxError) as error:
        raise ConfigError(f"{section} entry {entry!r}: {error}") from None
    if positional:
        raise ConfigError(f"{section} entry {entry!r}: name each parameter "
                          f"('name[parameter=value]'); positional values are ambiguous")
    return Component(name, {k: v if isinstance(v, list) else [v] for k, v in grid.items()})


def component(section: str, entry: Any) -> Component:
    if isinstance(entry, str):
        return bracketed(section, entry)
    if isinstance(entry, dict) and len(entry) == 1:
        name, grid = next(iter(entry.items()))
        grid = grid or {}
        if not isinstance(grid, dict):
            raise ConfigError(f"{section} '{name}': parameters must be a mapping, got {grid!r}")
        return Component(str(name), {k: v if isinstance(v, list) else [v]
                                     for k, v in grid.items()})
    raise ConfigError(f"{section} entry {entry!r} must be a name or a one-key mapping "
                      f"'name: {{parameter: value}}'")


def section(raw: dict, section: str, everything: list[str]) -> list[Component]:
    """The entries of a section; a missing section means all of ``everything``, and a single
    entry may be given without a list, as benchopt reads them."""
    if section not in raw:
        return [Component(name) for name in everything]
    entries = raw[section]
    if isinstance(entries, str | dict):
        entries = [entries]
    if not isinstance(entries, list) or not entries:
        raise ConfigError(f"config key '{section}' must be a non-empty list")
    return [component(section, entry) for entry in entries]


def solver_section(raw: dict, everything: list[str]) -> list[Component]:
    """'solver' entries plus 'force-solver' ones (benchopt runs both; scalebench never uses
    benchopt's cache, so forcing changes nothing else); all solvers when neither is given."""
    forced = raw.get("force-solver") or []
    forced = [component("force-solver", entry)
              for entry in (forced if isinstance(forced, list) else [forced])]
    if "solver" not in raw and forced:
        return forced
    return section(raw, "solver", everything) + forced
