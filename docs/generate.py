"""Write the parts of docs/*.md and README.md that are generated from the code, so that no page
can drift from it: the parameter tables (each dataset's and solver's ``Param`` specs, the run
options, scalebench's own config keys), the image families and their splits, the result columns
(scalebench.results.columns) and provenance columns (provenance.schema), the command reference
(the ``scalebench`` parser) and the README's copy of the default experiment
(configs/default.yml).

A generated part sits between ``<!-- BEGIN GENERATED: NAME -->`` and ``<!-- END GENERATED:
NAME -->``; the text around it is written by hand.

    python docs/generate.py            rewrite the generated parts
    python docs/generate.py --check    exit 1 naming every page that differs (the tests run it)
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable
from pathlib import Path

DOCS = Path(__file__).resolve().parent
sys.path.insert(0, str(DOCS.parent))  # run as a script: the package from this checkout
BLOCK = re.compile(r"(<!-- BEGIN GENERATED: (?P<name>[\w-]+) -->\n)(?P<body>.*?)"
                   r"(<!-- END GENERATED: (?P=name) -->)", re.S)


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


def table(header: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_cell(cell) for cell in row) + " |" for row in rows]
    return "\n".join(lines) + "\n"


def _value(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return str(value).lower()
    return f"`{value}`"


def parameter_table(specs: dict) -> str:
    """One row per parameter: name, default, allowed values, meaning."""
    return table(["parameter", "default", "allowed", "meaning"],
                 [[f"`{name}`", _value(spec.default), spec.describe(), spec.doc]
                  for name, spec in specs.items()])


def problem_tables(problems: dict) -> str:
    parts = []
    for name, spec in problems.items():
        parts.append(f"### `{name}`\n\n{spec.description}.\n\n{parameter_table(spec.params)}")
    return "\n".join(parts)


def solver_tables(solvers: dict) -> str:
    return "\n".join(f"### `{name}`\n\n{parameter_table(specs)}"
                     for name, specs in solvers.items())


def inference_datasets() -> str:
    from scalebench.benchmarks import INFERENCE

    return problem_tables(INFERENCE.problems)


def training_datasets() -> str:
    from scalebench.benchmarks import TRAINING

    return problem_tables(TRAINING.problems)


def inference_solvers() -> str:
    from scalebench.benchmarks import INFERENCE

    return solver_tables({name: spec.params for name, spec in INFERENCE.solvers.items()})


def image_families() -> str:
    """One row per problem with an image family: its names, splits and what they are."""
    from scalebench.benchmarks import INFERENCE

    def names(images) -> str:
        return ", ".join(f"`{name}`" for name in images)

    rows = [[f"`{name}`", f"`{spec.images.parameter}`", f"`{spec.images.default}`",
             names((*spec.images.named, f"{spec.images.seeded}-<n>")) + " (n >= 0)",
             names(spec.images.validation), names(spec.images.test), spec.images.description]
            for name, spec in INFERENCE.problems.items() if spec.images is not None]
    return table(["dataset", "parameter", "default", "names", "validation", "test",
                  "images"], rows)


def training_solvers() -> str:
    from scalebench.benchmarks import TRAINING

    return solver_tables({name: spec.params for name, spec in TRAINING.solvers.items()})


def tunable_spaces() -> str:
    """One row per (algorithm, denoiser kinds sharing its ranges): each tuned parameter's
    range, scale and meaning (scalebench.loops.algorithms.spaces)."""
    from scalebench.loops.algorithms.spaces import SPACES

    grouped: dict[tuple, list[str]] = {}
    for (algorithm, denoiser), space in SPACES.items():
        grouped.setdefault((algorithm, space.ranges), []).append(denoiser)
    rows = []
    for (algorithm, ranges), denoisers in grouped.items():
        for declared in ranges:
            unit = f" (x {declared.unit})" if declared.unit else ""
            rows.append([f"`{algorithm}`", ", ".join(denoisers), f"`{declared.name}`",
                         f"{declared.low:g} to {declared.high:g}{unit}", declared.scale,
                         declared.doc])
    return table(["algorithm", "denoisers", "parameter", "range", "scale", "meaning"], rows)


def run_options() -> str:
    from scalebench.experiment.config import RUN_OPTIONS

    return parameter_table(RUN_OPTIONS)


def scalebench_keys() -> str:
    from scalebench.experiment.scalebench_keys import SCALEBENCH_KEYS

    return parameter_table(SCALEBENCH_KEYS)


def result_columns() -> str:
    from scalebench.results.columns import OBJECTIVE_COLUMNS, RUN_COLUMNS, TUNING_COLUMNS

    return table(["column", "meaning"], [[f"`{name}`", meaning] for name, meaning in
                                         {**RUN_COLUMNS, **OBJECTIVE_COLUMNS,
                                          **TUNING_COLUMNS}.items()])


def stop_reasons() -> str:
    from provenance.stop_reasons import STOP_REASONS

    return table(["reason", "meaning"], [[f"`{reason}`", meaning]
                                         for reason, meaning in STOP_REASONS.items()])


def provenance_columns() -> str:
    from provenance.schema import FIELDS, column

    return table(["column", "type", "meaning"],
                 [[f"`{column(name)}`", kind.__name__, meaning]
                  for name, (kind, meaning) in FIELDS.items()])


def default_experiment() -> str:
    return f"```yaml\n{(DOCS.parent / 'configs' / 'default.yml').read_text()}```\n"


def subcommands() -> dict[str, argparse.ArgumentParser]:
    """The ``scalebench`` subcommands and their parsers, in the parser's order."""
    from scalebench.cli_arguments import build_parser

    actions = [a for a in build_parser()._actions if isinstance(a, argparse._SubParsersAction)]
    return dict(actions[0].choices)


def command_reference() -> str:
    parts = []
    for name, parser in subcommands().items():
        usage = " ".join(parser.format_usage().split()).removeprefix("usage: ")
        rows = []
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            names = ", ".join(f"`{option}`" for option in action.option_strings) or \
                f"`{action.dest}`"
            rows.append([names, action.help or ""])
        parts.append(f"## `scalebench {name}`\n\n{parser.description or ''}\n\n"
                     f"```\n{usage}\n```\n\n{table(['argument', 'meaning'], rows)}")
    return "\n".join(parts)


GENERATORS: dict[str, Callable[[], str]] = {
    "inference-datasets": inference_datasets, "training-datasets": training_datasets,
    "inference-solvers": inference_solvers, "training-solvers": training_solvers,
    "run-options": run_options, "scalebench-keys": scalebench_keys,
    "result-columns": result_columns,
    "provenance-columns": provenance_columns, "commands": command_reference,
    "default-experiment": default_experiment, "image-families": image_families,
    "stop-reasons": stop_reasons, "tunable-spaces": tunable_spaces,
}


def rendered(text: str) -> str:
    """``text`` with every generated part written anew."""
    def fill(match: re.Match) -> str:
        name = match.group("name")
        if name not in GENERATORS:
            raise SystemExit(f"generate.py: unknown generated part '{name}' (known: "
                             f"{', '.join(GENERATORS)})")
        return f"{match.group(1)}{GENERATORS[name]()}{match.group(4)}"
    return BLOCK.sub(fill, text)


def pages() -> list[Path]:
    return [*sorted(DOCS.glob("*.md")), DOCS.parent / "README.md"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true",
                        help="write nothing; exit 1 naming the pages that differ")
    args = parser.parse_args(argv)
    stale = []
    for page in pages():
        text = page.read_text()
        new = rendered(text)
        if new != text:
            stale.append(page)
            if not args.check:
                page.write_text(new)
    if args.check and stale:
        for page in stale:
            print(f"{page.relative_to(DOCS.parent)} differs from the code: run "
                  f"python docs/generate.py", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
