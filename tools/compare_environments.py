"""Two environments against each other: what ``scalebench compare`` says.

- Campaign ``cores2``: CT (tomography_2d) at ``--size``², ``--angles`` angles, PnP-TV,
  ``--iterations`` iterations, ``--repetitions`` repetitions, on every core; campaign
  ``core1``: the same under ``taskset -c 0`` (torch then runs one thread). Prints
  ``scalebench compare core1 cores2``'s differing fields, each measure's ratio with its
  spreads and verdict at compare's defaults, and whether the estimates agree.
- Host against the podman image (``--image``, an image podman knows): the same config run
  with ``scalebench run --runtime podman``; skipped, saying why, without podman or an image.

    python -m tools.compare_environments [--size 512] [--angles 128] [--iterations 10]
        [--repetitions 3] [--image IMAGE] [--folder DIR]

Prints markdown tables for docs/performance.md. How often compare cries wolf over identical
campaigns, and whether it catches slowed ones, is tools/compare_check's measurement.
"""

from __future__ import annotations

import argparse
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


def ct_config(folder: Path, size: int, angles: int, iterations: int, repetitions: int,
              experiments: int = 1, threads: int = 0, name: str = "ct") -> Path:
    """The experiments every campaign runs: CT at ``size``², PnP-TV on the CPU, one per noise
    seed (``experiments`` of them), on ``threads`` torch threads (0: torch's default)."""
    seeds = {"seed": list(range(experiments))} if experiments > 1 else {}
    dataset = {"tomography_2d": {"image_size": size, "num_angles": angles, "noise_level": 0.05,
                                 **seeds}}
    solver = {"device": "cpu", "denoiser": "tv", **({"num_threads": threads} if threads else {})}
    return write_config(folder / f"{name}.yml", {**pnp_config(dataset, solver, iterations, "1h"),
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


def compare(base: Path, candidate: Path, *options: object) -> dict:
    """`scalebench compare`'s JSON document (exit 1, a regression, is an answer too)."""
    done = run_scalebench("compare", base, candidate, "--format", "json", *options)
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


def print_podman(campaigns: Campaigns, image: str | None, host: Path) -> None:
    title = "host against the podman image"
    if shutil.which("podman") is None or not image:
        reason = "podman is not installed here" if shutil.which("podman") is None \
            else "no --image given"
        print(f"### {title}\n\nnot measured: {reason}\n")
        return
    in_image = campaigns.run("podman", options=["--runtime", "podman", "--image", image])
    print_pair(title, compare(host, in_image))


def parse(argv: list[str] | None) -> argparse.Namespace:
    parser = tool_parser(__doc__, __file__)
    parser.add_argument("--size", type=positive_int, default=512, help="image side (default 512)")
    parser.add_argument("--angles", type=positive_int, default=128,
                        help="projection angles (default 128)")
    add_iterations(parser, 10, "PnP iterations per run")
    parser.add_argument("--repetitions", type=positive_int, default=3,
                        help="repetitions per campaign (default 3)")
    parser.add_argument("--image", default=None, help="podman image for the host comparison")
    parser.add_argument("--folder", type=Path, default=None,
                        help="keep the campaigns here (default: a temporary folder); campaigns "
                        "already there are compared again, not re-run")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    folder = (args.folder or Path(tempfile.mkdtemp(prefix="compare-environments-"))).resolve()
    folder.mkdir(parents=True, exist_ok=True)
    campaigns = Campaigns(ct_config(folder, args.size, args.angles, args.iterations,
                                    args.repetitions), private_benchmark(folder))
    every_core = campaigns.run("cores2_0")
    one_core = campaigns.run("core1", prefix=["taskset", "-c", "0"])
    print(f"CT {args.size}², {args.angles} angles, PnP-TV, {args.iterations} iterations, "
          f"{args.repetitions} repetitions; results in {folder}\n")
    print_pair("taskset -c 0 (base) against every core (candidate), compare's defaults",
               compare(one_core, every_core))
    print_podman(campaigns, args.image, every_core)
    return 0


if __name__ == "__main__":
    sys.exit(main())
