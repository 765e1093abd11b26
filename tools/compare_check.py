"""``scalebench compare`` as a gate, measured: identical campaigns must be judged the same,
slowed ones slower, at one repetition (the ``--factor`` rule) and at several (the spread rule).

- ``--campaigns`` identical CT campaigns (tomography_2d at ``--size``², ``--angles`` angles,
  PnP-TV, ``--iterations`` iterations, ``--experiments`` experiments: one per noise seed), one
  torch thread, each under ``taskset -c QUIET`` (``--quiet-core``); as many slowed ones under
  ``taskset -c BUSY`` (``--busy-core``) beside a busy loop pinned to that core. One thread
  everywhere, so that both kinds run in one environment. Identical and slowed campaigns run
  in turn (identical, slowed, identical...), at each of ``--repetitions``.
- At compare's defaults, every ordered pair of identical campaigns and every slowed campaign
  (candidate) against every identical one (base): the verdicts counted and the exit status.
- Per ``--factors`` (one repetition) and ``--tolerances`` (several): the identical pairs with a
  'slower' (false alarms) and the slowed pairs judged 'slower' with exit 1 (caught); the
  smallest value with no false alarm that catches every slowed pair.
- The PSNR check: the first identical campaign against a copy of it whose PSNR column is
  0.3 dB lower ('worse' expected) and 0.05 dB lower ('same').

    python -m tools.compare_check [--size 256] [--angles 128] [--iterations 8]
        [--experiments 4] [--campaigns 5] [--repetitions 1 3] [--factors 1.25 1.5 1.8 2]
        [--tolerances 0.25 0.5 0.8] [--quiet-core 1] [--busy-core 0] [--folder DIR]

Targets (exit 1 when one is missed): at compare's defaults no 'slower' and exit 0 in any
identical pair, 'slower' and exit 1 in every slowed pair, at every repetition count; the PSNR
check's verdicts. Prints markdown tables for docs/performance.md, with the load average. Run
it on an otherwise idle machine: other work on the quiet core is drift between campaigns.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import itertools
import json
import subprocess
import sys
import tempfile
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from scalebench.cli_arguments import positive_int
from scalebench.results.compare_rules import DEFAULT_FACTOR, DEFAULT_TOLERANCE
from tools.compare_environments import Campaigns, ct_config
from tools.measuring import (
    Table,
    add_iterations,
    launched_results,
    load_text,
    print_targets,
    private_benchmark,
    tool_parser,
)

PSNR = "objective_psnr_db"
PSNR_DROPS = {0.3: "worse", 0.05: "same"}  # dB lower -> the verdict expected
QUALITY_MEASURES = ("best PSNR", "final PSNR")


@dataclass(frozen=True)
class Judged:
    """One `scalebench compare` of a pair: its exit status and each measure's verdict."""

    base: str
    candidate: str
    status: int
    verdicts: tuple[str, ...]

    @property
    def slower(self) -> bool:
        return "slower" in self.verdicts

    @property
    def caught(self) -> bool:
        """A slowed candidate judged so: 'slower' and exit 1."""
        return self.slower and self.status == 1

    @property
    def quiet(self) -> bool:
        """An identical pair judged so: no 'slower' and exit 0."""
        return not self.slower and self.status == 0


def judge(base: Path, candidate: Path, *options: str) -> tuple[int, dict]:
    """`scalebench compare BASE CANDIDATE --format json OPTIONS` in this process (hundreds of
    pairs): its exit status and JSON document."""
    from scalebench.cli import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        status = main(["compare", str(base), str(candidate), "--format", "json", *options])
    if status not in (0, 1):
        sys.exit(f"compare {base.name} {candidate.name} failed: {err.getvalue().strip()}")
    return status, json.loads(out.getvalue())


def judged(base: Path, candidate: Path, *options: str) -> Judged:
    status, found = judge(base, candidate, *options)
    verdicts = tuple(m["verdict"] for e in found["experiments"] for m in e["measures"])
    return Judged(base.stem, candidate.stem, status, verdicts)


def pairs(identical: list[Path], slowed: list[Path]
          ) -> tuple[list[tuple[Path, Path]], list[tuple[Path, Path]]]:
    """Every ordered pair of identical campaigns; every (identical base, slowed candidate)."""
    return list(itertools.permutations(identical, 2)), list(itertools.product(identical, slowed))


@contextlib.contextmanager
def busy_loop(core: int) -> Iterator[None]:
    """A Python loop spinning on ``core`` for the duration of the block."""
    loop = subprocess.Popen(["taskset", "-c", str(core), sys.executable, "-c",
                             "while True: pass"])
    try:
        yield
    finally:
        loop.terminate()
        loop.wait()


def run_campaigns(campaigns: Campaigns, repetitions: int, count: int, quiet: int, busy: int
                  ) -> tuple[list[Path], list[Path]]:
    """``count`` identical and ``count`` slowed campaigns of ``repetitions``, in turn."""
    identical, slowed = [], []
    for index in range(count):
        identical.append(campaigns.run(f"r{repetitions}_identical_{index}",
                                       prefix=["taskset", "-c", str(quiet)]))
        name = f"r{repetitions}_slowed_{index}"
        done = launched_results(campaigns.benchmark, name).is_file()
        with contextlib.nullcontext() if done else busy_loop(busy):
            slowed.append(campaigns.run(name, prefix=["taskset", "-c", str(busy)]))
    return identical, slowed


def print_defaults(repetitions: int, identical: list[Path], slowed: list[Path]
                   ) -> list[tuple[str, bool, str]]:
    """Every pair at compare's defaults; the targets they meet or miss."""
    print(f"### {repetitions} repetition(s): every pair at compare's defaults (factor "
          f"{DEFAULT_FACTOR:g}, tolerance {DEFAULT_TOLERANCE:.0%})\n")
    table = Table("kind", "base", "candidate", "verdicts", "exit")
    table.header()
    same, other = pairs(identical, slowed)
    found = {}
    for kind, chosen in (("identical", same), ("slowed", other)):
        found[kind] = [judged(base, candidate) for base, candidate in chosen]
        for pair in found[kind]:
            table.row(kind, pair.base, pair.candidate, _counted(Counter(pair.verdicts)),
                      pair.status)
    print()
    quiet = sum(pair.quiet for pair in found["identical"])
    caught = sum(pair.caught for pair in found["slowed"])
    return [(f"{repetitions} repetition(s): identical pairs without 'slower', exit 0",
             quiet == len(same), f"{quiet} of {len(same)}"),
            (f"{repetitions} repetition(s): slowed pairs 'slower', exit 1",
             caught == len(other), f"{caught} of {len(other)}")]


def print_sweep(repetitions: int, identical: list[Path], slowed: list[Path],
                name: str, values: list[float]) -> None:
    """False alarms and slowed pairs caught at each value of ``--factor`` or ``--tolerance``
    (``name``), and the smallest value with none of the first and all of the second."""
    print(f"### {repetitions} repetition(s): per {name}\n")
    table = Table(name, "identical pairs with a 'slower'", "slowed pairs caught ('slower', "
                  "exit 1)")
    table.header()
    same, other = pairs(identical, slowed)
    chosen = None
    for value in values:
        option = [f"--{name}", f"{value:g}"]
        alarms = sum(judged(b, c, *option).slower for b, c in same)
        caught = sum(judged(b, c, *option).caught for b, c in other)
        table.row(f"{value:g}", f"{alarms} of {len(same)}", f"{caught} of {len(other)}")
        if chosen is None and alarms == 0 and caught == len(other):
            chosen = value
    print(f"\nsmallest {name} without a false alarm that catches every slowed pair: "
          f"{'none of these' if chosen is None else f'{chosen:g}'}\n")


def lowered_copy(path: Path, decibels: float, folder: Path) -> Path:
    """A copy of results ``path`` whose PSNR column is ``decibels`` lower (its provenance and
    run status kept: the file's metadata is copied as it is)."""
    import pyarrow.compute as pc
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    index = table.schema.get_field_index(PSNR)
    lowered = table.set_column(index, table.schema.field(index),
                               pc.subtract(table.column(PSNR), decibels))
    copy = folder / f"{path.stem}_psnr_minus_{decibels:g}dB.parquet"
    pq.write_table(lowered.replace_schema_metadata(table.schema.metadata), copy)
    return copy


def print_psnr_check(base: Path, folder: Path) -> list[tuple[str, bool, str]]:
    print(f"### PSNR check: {base.stem} against a copy with a lower PSNR column\n")
    table = Table("PSNR lower by", *QUALITY_MEASURES, "expected")
    table.header()
    targets = []
    for drop, expected in PSNR_DROPS.items():
        _, found = judge(base, lowered_copy(base, drop, folder))
        words = {measure: Counter(m["verdict"] for e in found["experiments"]
                                  for m in e["measures"] if m["measure"] == measure)
                 for measure in QUALITY_MEASURES}
        table.row(f"{drop:g} dB", *(_counted(words[m]) for m in QUALITY_MEASURES), expected)
        every = set().union(*words.values())
        targets.append((f"PSNR {drop:g} dB lower: {expected}", every == {expected},
                        "; ".join(f"{m} {_counted(words[m])}" for m in QUALITY_MEASURES)))
    print()
    return targets


def _counted(verdicts: Counter) -> str:
    """'4 worse' or '3 worse, 1 same': a measure's verdicts over the experiments."""
    return ", ".join(f"{count} {word}" for word, count in sorted(verdicts.items()))


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = tool_parser(__doc__, __file__)
    parser.add_argument("--size", type=positive_int, default=256, help="image side (default 256)")
    parser.add_argument("--angles", type=positive_int, default=128,
                        help="projection angles (default 128)")
    add_iterations(parser, 8, "PnP iterations per run")
    parser.add_argument("--experiments", type=positive_int, default=4,
                        help="experiments per campaign, one per noise seed (default 4)")
    parser.add_argument("--campaigns", type=positive_int, default=5,
                        help="identical campaigns, and as many slowed ones, per repetition "
                        "count; at least 2 (default 5)")
    parser.add_argument("--repetitions", type=positive_int, nargs="+", default=[1, 3],
                        help="repetitions per campaign, one set of campaigns each "
                        "(default 1 3)")
    parser.add_argument("--factors", type=float, nargs="+", default=[1.25, 1.5, 1.8, 2.0],
                        help="compare's --factor values tried at one repetition")
    parser.add_argument("--tolerances", type=float, nargs="+", default=[0.25, 0.5, 0.8],
                        help="compare's --tolerance values tried at several repetitions")
    parser.add_argument("--quiet-core", type=int, default=1,
                        help="the core identical campaigns run on (default 1)")
    parser.add_argument("--busy-core", type=int, default=0,
                        help="the core slowed campaigns share with a busy loop (default 0)")
    parser.add_argument("--folder", type=Path, default=None,
                        help="keep the campaigns here (default: a temporary folder); campaigns "
                        "already there are compared again, not re-run")
    args = parser.parse_args(argv)
    if args.campaigns < 2:
        parser.error(f"--campaigns must be at least 2 (a pair to compare), got {args.campaigns}")
    if args.quiet_core == args.busy_core:
        parser.error(f"--quiet-core and --busy-core must differ, got {args.quiet_core} twice")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    folder = (args.folder or Path(tempfile.mkdtemp(prefix="compare-check-"))).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    benchmark = private_benchmark(folder)
    print(f"CT {args.size}², {args.angles} angles, PnP-TV, {args.iterations} iterations, "
          f"{args.experiments} experiment(s), one torch thread; {args.campaigns} identical "
          f"campaigns on core {args.quiet_core}, {args.campaigns} slowed on core "
          f"{args.busy_core} beside a busy loop; results in {folder}; load average at the "
          f"start {load_text()}\n")
    targets = []
    for repetitions in args.repetitions:
        config = ct_config(folder, args.size, args.angles, args.iterations, repetitions,
                           args.experiments, threads=1, name=f"ct_{repetitions}")
        campaigns = Campaigns(config, benchmark)
        identical, slowed = run_campaigns(campaigns, repetitions, args.campaigns,
                                          args.quiet_core, args.busy_core)
        targets += print_defaults(repetitions, identical, slowed)
        name, values = ("factor", args.factors) if repetitions == 1 else \
            ("tolerance", args.tolerances)
        print_sweep(repetitions, identical, slowed, name, values)
        if repetitions == args.repetitions[0]:
            targets += print_psnr_check(identical[0], folder)
    print(f"load average at the end: {load_text()}\n")
    return print_targets(targets)


if __name__ == "__main__":
    sys.exit(main())
