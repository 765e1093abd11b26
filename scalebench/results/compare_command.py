"""The ``scalebench compare`` subcommand: its arguments, and the comparison as a table or JSON.

Imports only the standard library at module level (the ``scalebench`` command line loads it
to build its parser); the comparison itself (pandas) loads when the command runs.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from scalebench.errors import EXIT_FAILED, EXIT_OK, ScalebenchError

DESCRIPTION = ("Compare the same experiments in two results files (two machines, images, "
               "commits or core counts): per measure the median over repetitions on each side, "
               "the spread, the ratio and a verdict, whether the estimates are equal bit for "
               "bit, and the environment fields that differ (exit 0 nothing worse, 1 something "
               "is: slower, larger, worse quality, a quality target no longer reached, an "
               "experiment cut by its time limit, or with --exact estimates no longer equal; "
               "2 bad input).")
SUMMARY = "compare two results files: timings, memory, quality and environments"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    from scalebench.results.compare_rules import (
        DEFAULT_FACTOR,
        DEFAULT_QUALITY_DB,
        DEFAULT_TOLERANCE,
    )
    from scalebench.statistics import MIN_REPETITIONS

    parser.add_argument("base", type=Path, help="results parquet file of reference (e.g. an "
                        "archived one)")
    parser.add_argument("candidate", type=Path, help="results parquet file to judge")
    parser.add_argument("--tolerance", default=str(DEFAULT_TOLERANCE),
                        help=f"a fraction in (0, 1): with {MIN_REPETITIONS} or more repetitions "
                        f"a side, a time, memory or throughput ratio of medians within 1 + "
                        f"it (or a difference within a side's spread) is 'same' (default "
                        f"{DEFAULT_TOLERANCE:g}; false alarms of identical campaigns: "
                        f"docs/performance.md)")
    parser.add_argument("--factor", default=str(DEFAULT_FACTOR),
                        help=f"a ratio of at least 1: with one repetition on a side (a single "
                        f"run), a time, memory or throughput ratio of medians within it is "
                        f"'same' (default {DEFAULT_FACTOR:g})")
    parser.add_argument("--quality-tolerance", default=f"{DEFAULT_QUALITY_DB:g}dB",
                        help=f"quality in dB (PSNR, SNR) differing by at most this is 'same', "
                        f"written with its unit (default {DEFAULT_QUALITY_DB:g}dB)")
    parser.add_argument("--exact", action="store_true",
                        help="experiments with equal config hash, data digest, image digest, "
                        "torch threads, world size, device and deterministic mode must have "
                        "equal result digests on every common iteration (exit 1 naming the "
                        "first that differs); the others are listed and skipped")
    parser.add_argument("--format", choices=("text", "json"), default="text",
                        help="a table (default) or JSON")
    parser.add_argument("--per-image", action="store_true",
                        help="match experiments image by image (by config hash), not a "
                        "configuration run on several images on both sides by its figures "
                        "over them")


def thresholds(args: argparse.Namespace):
    """The Thresholds the arguments give (ScalebenchError for text that is not one)."""
    from scalebench.results.compare_rules import Thresholds, quality_db

    try:
        quality = quality_db(args.quality_tolerance)
    except ValueError as error:
        raise ScalebenchError(str(error)) from None
    return Thresholds(_number(args.tolerance, "--tolerance must be a fraction in (0, 1), e.g. "
                                              "0.1 for 10 %"),
                      _number(args.factor, "--factor must be a ratio of at least 1, e.g. 1.8"),
                      quality)


def _number(text: str, what: str) -> float:
    try:
        return float(text)
    except ValueError:
        raise ScalebenchError(f"{what}; got {text!r}") from None


def run_compare(args: argparse.Namespace) -> int:
    from scalebench.results.compare import compare

    comparison = compare(args.base, args.candidate, thresholds(args), args.per_image,
                         args.exact)
    if args.format == "json":
        print(json.dumps(comparison.to_json(), indent=1))
    else:
        print("\n".join(text_lines(comparison)))
    return EXIT_FAILED if comparison.failed else EXIT_OK


def _figure(value: float | None, digits: int = 4) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _with_spread(median: float | None, spread: float | None) -> str:
    return f"{_figure(median)} ±{_figure(spread, 2)}" if spread is not None \
        else f"{_figure(median)} (spread ?)"


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(str(r[i])) for r in [header, *rows]) for i in range(len(header))]
    return ["  ".join(str(v).ljust(w) for v, w in zip(row, widths, strict=True)).rstrip()
            for row in [header, *rows]]


def text_lines(comparison) -> list[str]:
    """The comparison as a reader scans it: what differs, then one table per experiment."""
    lines = [f"base:      {comparison.base}", f"candidate: {comparison.candidate}",
             f"tolerance: {comparison.thresholds.text()}"]
    if comparison.differences:
        lines.append("environment fields that differ (base -> candidate):")
        lines += [f"  {name}: {base or '-'} -> {candidate or '-'}"
                  for name, (base, candidate) in comparison.differences.items()]
    else:
        lines.append("environment: the same on both sides")
    lines += [f"  (shown, not compared) {name}: {base or '-'} -> {candidate or '-'}"
              for name, (base, candidate) in comparison.shown.items()]
    for experiment in comparison.experiments:
        base_reps, candidate_reps = experiment.repetitions
        images = "" if experiment.images == (1, 1) else \
            f"{experiment.images[0]} -> {experiment.images[1]} images, "
        lines += ["", f"{experiment.name} ({images}{base_reps} -> {candidate_reps} "
                      f"repetition(s)); "
                      f"estimates bit for bit: {experiment.bitwise}; largest "
                      f"{experiment.metric} difference over iterations: "
                      f"{_figure(experiment.largest_metric_difference)}"]
        if experiment.cut:
            lines.append(f"  stopped early: base {experiment.stops[0].text()}; candidate "
                         f"{experiment.stops[1].text()} (not compared as complete: "
                         f"{experiment.cut})")
        if experiment.exact:
            lines.append(f"  --exact: {experiment.exact.line}")
        rows = [[m["measure"], _with_spread(m["base"], m["base_spread"]),
                 _with_spread(m["candidate"], m["candidate_spread"]), _change(m),
                 _verdict_text(m)] for m in experiment.measures]
        lines += ["  " + line for line in _table(
            ["measure", "base median", "candidate median", "ratio or dB", "verdict"], rows)]
    for side, names in (("base", comparison.only_base),
                        ("candidate", comparison.only_candidate)):
        lines += [f"only in {side}: {name}" for name in names]
        lines += [f"not run to its end in {side}: {name}"
                  for name in comparison.unfinished.get(side, [])]
    lines += ["", closing_line(comparison)]
    return lines


def _change(measure: dict) -> str:
    """The ratio candidate / base; for a measure in dB, the difference in dB (how it is
    judged)."""
    if measure.get("unit") and None not in (measure["base"], measure["candidate"]):
        return f"{measure['candidate'] - measure['base']:+.3g} {measure['unit']}"
    return _figure(measure["ratio"], 3)


def _verdict_text(measure: dict) -> str:
    from scalebench.results.compare_rules import CUT, SINGLE_RUN

    single = measure["single_run"] and measure["verdict"] != CUT
    return f"{measure['verdict']} ({SINGLE_RUN})" if single else measure["verdict"]


def closing_line(comparison) -> str:
    """How many regressions, and with --exact how many experiments lost their identity."""
    line = (f"{comparison.regressions} regression(s) (slower, larger, worse, cut) beyond the "
            f"thresholds")
    checked = [e for e in comparison.experiments if e.exact]
    if checked:
        differ = comparison.exact_differences
        line += (f"; --exact: {len(differ)} of {len(checked)} experiment(s) differ bit for "
                 f"bit" + (f" ({', '.join(e.name for e in differ)})" if differ else ""))
    return line
