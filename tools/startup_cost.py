"""CPU time and memory of a rank's benchopt process with scalebench's start-up against plain
benchopt, side by side on one small experiment.

Runs, alternately and REPEATS times each, `python -m benchopt run` and `python -m
scalebench.benchopt_glue run` (what a rank process runs: the libraries imported with the
garbage collector paused, collected once, then frozen; scalebench/rank/startup.py) on a
64x64 tomography problem, 5 PnP iterations with TV. Prints each one's median CPU time (user +
system, from the process's own accounting), median wall time and largest resident set, the
ratios of the start-up's figures to plain benchopt's (targets: CPU at most 0.8, resident set
within 1 %), and whether both wrote the same quality figures.

    python -m tools.startup_cost [--repeats 5]
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
from pathlib import Path

from scalebench.benchmarks import INFERENCE
from tools.measuring import Stopwatch, Table, add_repeats, median, tool_parser, write_config

TARGET_CPU_RATIO = 0.8
TARGET_RSS_RATIO = 0.01
EXPERIMENT = {
    "objective": ["imaging_inverse_problem"],
    "dataset": [{"tomography_2d": {"image_size": 64, "num_angles": 30}}],
    "solver": [{"pnp": {"denoiser": "tv", "max_iter": 5, "device": "cpu"}}],
}
VARIANTS = ("plain benchopt", "scalebench start-up")
QUALITY = ("objective_psnr_db", "objective_ssim", "objective_mse")


def command(variant: str, config: Path, output: Path) -> list[str]:
    """The rank's command line (scalebench.launch.rank_entry), or plain benchopt with the
    same arguments."""
    from scalebench.launch.rank_entry import benchopt_arguments, benchopt_command

    benchmark = INFERENCE.path
    if variant == "plain benchopt":
        return [sys.executable, "-m", "benchopt",
                *benchopt_arguments(benchmark, config, output)]
    return benchopt_command([sys.executable], benchmark, config, output)


def run_once(variant: str, config: Path, output: Path) -> tuple[float, float, float]:
    """One benchopt process: (CPU seconds, wall seconds, largest resident set in MiB)."""
    command_line = command(variant, config, output)
    errors = output.with_suffix(".stderr")
    with Stopwatch() as wall, errors.open("w") as stderr:
        process = subprocess.Popen(command_line, stdout=subprocess.DEVNULL, stderr=stderr)
        _, status, usage = os.wait4(process.pid, 0)
    if os.waitstatus_to_exitcode(status) != 0:
        sys.exit(f"{' '.join(command_line)} failed: {errors.read_text()[-2000:]}")
    return usage.ru_utime + usage.ru_stime, wall.seconds, usage.ru_maxrss / 1024


def quality(path: Path) -> list[float]:
    import pandas as pd

    rows = pd.read_parquet(path)
    return rows[list(QUALITY)].to_numpy().ravel().tolist()


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, __file__)
    add_repeats(parser, 5, "runs of each process")
    args = parser.parse_args(argv)
    figures: dict[str, list[tuple[float, float, float]]] = {variant: [] for variant in VARIANTS}
    with tempfile.TemporaryDirectory() as folder:
        config = write_config(Path(folder) / "experiment.yml", EXPERIMENT)
        outputs = {variant: Path(folder) / f"{index}.parquet"
                   for index, variant in enumerate(VARIANTS)}
        for _ in range(args.repeats):
            for variant in VARIANTS:
                figures[variant].append(run_once(variant, config, outputs[variant]))
        same = quality(outputs["plain benchopt"]) == quality(outputs["scalebench start-up"])
    print(f"medians over {args.repeats} runs; RSS: the largest")
    table = Table("process", "CPU s", "wall s", "max RSS MiB")
    table.header()
    summary_of = {}
    for name, rows in figures.items():
        cpu = median(row[0] for row in rows)
        rss = max(row[2] for row in rows)
        summary_of[name] = (cpu, rss)
        table.row(name, f"{cpu:.2f}", f"{median(row[1] for row in rows):.2f}",
                  f"{rss:.1f}")
    (plain_cpu, plain_rss), (ours_cpu, ours_rss) = summary_of.values()
    cpu_ratio, rss_change = ours_cpu / plain_cpu, ours_rss / plain_rss - 1
    met = cpu_ratio <= TARGET_CPU_RATIO and abs(rss_change) <= TARGET_RSS_RATIO and same
    print(f"CPU ratio {cpu_ratio:.2f} (target <= {TARGET_CPU_RATIO}); resident set "
          f"{100 * rss_change:+.2f} % (target within {100 * TARGET_RSS_RATIO:.0f} %); "
          f"same quality figures: {'yes' if same else 'NO'}; {'met' if met else 'missed'}")
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())
