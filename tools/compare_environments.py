"""Two environments against each other, and one against itself: what ``scalebench compare``
says, and how often it cries wolf.

- Campaign ``cores2``: CT (tomography_2d) at ``--size``², ``--angles`` angles, PnP-TV,
  ``--iterations`` iterations, ``--repetitions`` repetitions, on every core; campaign
  ``core1``: the same under ``taskset -c 0`` (torch then runs one thread). Prints
  ``scalebench compare core1 cores2``'s differing fields, the gradient step's and the
  iteration's ratio with their spreads and verdicts, and whether the estimates agree.
- ``--identical`` campaigns on every core (``cores2`` is the first): over every ordered pair
  and every measure, the share of 'slower'/'larger'/'worse' verdicts (false alarms: nothing
  changed) at each of ``--tolerances``; the default tolerance is the smallest with none.
- Host against the podman image (``--image``, an image podman knows): the same config run
  with ``scalebench run --runtime podman``; skipped, saying why, without podman or an image.

    python -m tools.compare_environments [--size 512] [--angles 128] [--iterations 10]
        [--repetitions 3] [--identical 5] [--tolerances 0.05 0.1 0.2 0.5] [--image IMAGE]
        [--folder DIR]

Prints markdown tables for docs/performance.md. Timings on a shared machine are noisy: that
is what the identical campaigns measure.
"""

from __future__ import annotations

import argparse
import itertools
import json
import shutil
import sys
import tempfile
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from scalebench.cli_arguments import positive_int
from tools.measuring import (
    Table,
    add_iterations,
    launched_results,
    pnp_config,
    private_benchmark,
    run_config,
    run_scalebench,
    tool_parser,
    write_config,
)


def ct_config(folder: Path, size: int, angles: int, iterations: int, repetitions: int
              ) -> Path:
    """The one experiment every campaign runs: CT at ``size``², PnP-TV on the CPU."""
    dataset = {"tomography_2d": {"image_size": size, "num_angles": angles, "noise_level": 0.05}}
    solver = {"device": "cpu", "denoiser": "tv"}
    return write_config(folder / "ct.yml", {**pnp_config(dataset, solver, iterations, "1h"),
                                            "n-repetitions": repetitions})


@dataclass(frozen=True)
class Campaigns:
    """The campaigns of one folder: launches of its config into its benchmark copy."""

    config: Path
    benchmark: Path

    def run(self, name: str, prefix: Sequence[str] = (), options: Sequence[str] = ()) -> Path:
        """The results of campaign ``name`` (under the command ``prefix``); one already in the
        folder (an earlier call with the same ``--folder``) is kept, not run again."""
        results = launched_results(self.benchmark, name)
        if results.is_file():
            return results
        launch = run_config(self.config, self.benchmark, name, options=options, prefix=prefix)
        if launch.finished.returncode != 0:
            sys.exit(f"campaign {name} failed:\n{launch.finished.stderr[-3000:]}")
        print(f"campaign {name}: {launch.finished.wall_s:.0f} s", file=sys.stderr)
        return launch.results


def compare(base: Path, candidate: Path, tolerance: float) -> dict:
    """`scalebench compare`'s JSON document (exit 1, a regression, is an answer too)."""
    done = run_scalebench("compare", base, candidate, "--format", "json",
                          "--tolerance", tolerance)
    if done.returncode not in (0, 1):
        sys.exit(f"compare failed: {done.stderr.strip()}")
    return json.loads(done.stdout)


def figure(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def print_measures(comparison: dict) -> None:
    table = Table("measure", "base median (spread)", "candidate median (spread)", "ratio",
                  "verdict")
    table.header()
    for experiment in comparison["experiments"]:
        for m in experiment["measures"]:
            table.row(m["measure"], f"{figure(m['base'])} ({figure(m['base_spread'], 2)})",
                      f"{figure(m['candidate'])} ({figure(m['candidate_spread'], 2)})",
                      figure(m["ratio"]), m["verdict"])


def print_pair(title: str, comparison: dict) -> None:
    differences = "; ".join(f"{k}: {b} -> {c}" for k, (b, c) in
                            comparison["differences"].items()) or "none"
    agreement = "; ".join(f"bit for bit {e['bit_for_bit']}, largest {e['metric']} difference "
                          f"{figure(e['largest_metric_difference'])}"
                          for e in comparison["experiments"])
    print(f"### {title}\n\ndiffering fields: {differences}\n\nestimates: {agreement}\n")
    print_measures(comparison)
    print()


def false_alarms(files: list[Path], tolerances: list[float]) -> float:
    """Prints the share of 'worse' verdicts over every ordered pair of identical campaigns and
    every measure, per tolerance; returns the smallest tolerance without one (else the
    largest)."""
    print(f"### {len(files)} identical campaigns on every core: false alarms\n")
    table = Table("tolerance", "judgements", "false 'slower'/'larger'/'worse'", "rate")
    table.header()
    chosen = None
    for tolerance in tolerances:
        judged = alarms = 0
        for base, candidate in itertools.permutations(files, 2):
            for experiment in compare(base, candidate, tolerance)["experiments"]:
                judged += len(experiment["measures"])
                alarms += sum(m["regression"] for m in experiment["measures"])
        table.row(f"{tolerance:.0%}", judged, alarms, f"{alarms / judged:.1%}")
        if alarms == 0 and chosen is None:
            chosen = tolerance
    print(f"\nsmallest tolerance without a false alarm: "
          f"{'none of these' if chosen is None else f'{chosen:.0%}'}\n")
    return chosen if chosen is not None else max(tolerances)


def print_podman(campaigns: Campaigns, image: str | None, host: Path, tolerance: float) -> None:
    title = "host against the podman image"
    if shutil.which("podman") is None or not image:
        reason = "podman is not installed here" if shutil.which("podman") is None \
            else "no --image given"
        print(f"### {title}\n\nnot measured: {reason}\n")
        return
    in_image = campaigns.run("podman", options=["--runtime", "podman", "--image", image])
    print_pair(title, compare(host, in_image, tolerance))


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = tool_parser(__doc__, __file__)
    parser.add_argument("--size", type=positive_int, default=512, help="image side (default 512)")
    parser.add_argument("--angles", type=positive_int, default=128,
                        help="projection angles (default 128)")
    add_iterations(parser, 10, "PnP iterations per run")
    parser.add_argument("--repetitions", type=positive_int, default=3,
                        help="repetitions per campaign (default 3)")
    parser.add_argument("--identical", type=positive_int, default=5,
                        help="identical campaigns on every core, at least 2 (default 5)")
    parser.add_argument("--tolerances", type=float, nargs="+", default=[0.05, 0.1, 0.2, 0.5],
                        help="compare's tolerances tried, fractions in (0, 1)")
    parser.add_argument("--image", default=None, help="podman image for the host comparison")
    parser.add_argument("--folder", type=Path, default=None,
                        help="keep the campaigns here (default: a temporary folder); campaigns "
                        "already there are compared again, not re-run")
    args = parser.parse_args(argv)
    if args.identical < 2:
        parser.error(f"--identical must be at least 2 (a pair to compare), got {args.identical}")
    if not all(0 < tolerance < 1 for tolerance in args.tolerances):
        parser.error(f"--tolerances must be fractions in (0, 1), e.g. 0.1 for 10 %; got "
                     f"{' '.join(f'{t:g}' for t in args.tolerances)}")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    folder = (args.folder or Path(tempfile.mkdtemp(prefix="compare-environments-"))).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    campaigns = Campaigns(ct_config(folder, args.size, args.angles, args.iterations,
                                    args.repetitions), private_benchmark(folder))
    identical = [campaigns.run(f"cores2_{i}") for i in range(args.identical)]
    one_core = campaigns.run("core1", prefix=["taskset", "-c", "0"])
    print(f"CT {args.size}², {args.angles} angles, PnP-TV, {args.iterations} iterations, "
          f"{args.repetitions} repetitions; results in {folder}\n")
    tolerance = false_alarms(identical, args.tolerances)
    print_pair(f"taskset -c 0 (base) against every core (candidate), tolerance {tolerance:.0%}",
               compare(one_core, identical[0], tolerance))
    print_podman(campaigns, args.image, identical[0], tolerance)
    return 0


if __name__ == "__main__":
    sys.exit(main())
