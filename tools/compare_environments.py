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

import itertools
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from scalebench.benchmarks import INFERENCE
from scalebench.cli_arguments import positive_int
from tools.measuring import REPO, add_iterations, tool_parser


def _config(size: int, angles: int, iterations: int, repetitions: int) -> str:
    return (f"objective: [imaging_inverse_problem]\n"
            f"dataset:\n  - tomography_2d: {{image_size: {size}, num_angles: {angles}, "
            f"noise_level: 0.05}}\n"
            f"solver:\n  - pnp: {{max_iter: {iterations}, device: cpu, denoiser: tv}}\n"
            f"n-repetitions: {repetitions}\nmax-runs: 100\ntimeout: 3600\n")


def _run(folder: Path, name: str, prefix: list[str], extra: list[str] = ()) -> Path:
    """One campaign: ``scalebench run`` of the folder's config (under ``prefix``); a campaign
    already in the folder (an earlier call with the same ``--folder``) is kept."""
    if (folder / "results" / f"{name}.parquet").is_file():
        return folder / "results" / f"{name}.parquet"
    started = time.monotonic()
    command = [*prefix, sys.executable, "-m", "scalebench", "run", str(folder / "ct.yml"),
               "--benchmark", str(folder / "benchmark_inference"), "--no-html",
               "--output", name, "--outputs", str(folder / "results"), *extra]
    done = subprocess.run(command, cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        sys.exit(f"campaign {name} failed:\n{done.stderr[-3000:]}")
    print(f"campaign {name}: {time.monotonic() - started:.0f} s", file=sys.stderr)
    return folder / "results" / f"{name}.parquet"


def _compare(base: Path, candidate: Path, tolerance: float) -> dict:
    done = subprocess.run([sys.executable, "-m", "scalebench", "compare", str(base),
                           str(candidate), "--format", "json", "--tolerance", str(tolerance)],
                          cwd=REPO, capture_output=True, text=True, check=False)
    if done.returncode not in (0, 1):
        sys.exit(f"compare failed: {done.stderr.strip()}")
    return json.loads(done.stdout)


def _figure(value, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}g}"


def _measures_table(comparison: dict) -> list[str]:
    lines = ["| measure | base median (spread) | candidate median (spread) | ratio | verdict |",
             "|---|---|---|---|---|"]
    for experiment in comparison["experiments"]:
        for m in experiment["measures"]:
            lines.append(f"| {m['measure']} | {_figure(m['base'])} ({_figure(m['base_spread'], 2)})"
                         f" | {_figure(m['candidate'])} ({_figure(m['candidate_spread'], 2)}) | "
                         f"{_figure(m['ratio'])} | {m['verdict']} |")
    return lines


def _pair_section(title: str, comparison: dict) -> list[str]:
    differences = "; ".join(f"{k}: {b} -> {c}" for k, (b, c) in
                            comparison["differences"].items()) or "none"
    agreement = "; ".join(f"bit for bit {e['bit_for_bit']}, largest {e['metric']} difference "
                          f"{_figure(e['largest_metric_difference'])}"
                          for e in comparison["experiments"])
    return [f"### {title}", "", f"differing fields: {differences}", "",
            f"estimates: {agreement}", "", *_measures_table(comparison), ""]


def false_alarms(files: list[Path], tolerances: list[float]) -> tuple[list[str], float]:
    """Share of 'worse' verdicts over every ordered pair of identical campaigns and every
    measure, per tolerance."""
    lines = ["| tolerance | judgements | false 'slower'/'larger'/'worse' | rate |",
             "|---|---|---|---|"]
    chosen = None
    for tolerance in tolerances:
        judged = alarms = 0
        for base, candidate in itertools.permutations(files, 2):
            for experiment in _compare(base, candidate, tolerance)["experiments"]:
                judged += len(experiment["measures"])
                alarms += sum(m["regression"] for m in experiment["measures"])
        lines.append(f"| {tolerance:.0%} | {judged} | {alarms} | {alarms / judged:.1%} |")
        if alarms == 0 and chosen is None:
            chosen = tolerance
    lines += ["", f"smallest tolerance without a false alarm: "
                  f"{'none of these' if chosen is None else f'{chosen:.0%}'}", ""]
    return lines, chosen if chosen is not None else max(tolerances)


def podman_section(folder: Path, image: str | None, host: Path,
                   tolerance: float) -> list[str]:
    if shutil.which("podman") is None or not image:
        reason = "podman is not installed here" if shutil.which("podman") is None \
            else "no --image given"
        return ["### host against the podman image", "", f"not measured: {reason}", ""]
    in_image = _run(folder, "podman", [], ["--runtime", "podman", "--image", image])
    return _pair_section("host against the podman image", _compare(host, in_image, tolerance))


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, __file__)
    parser.add_argument("--size", type=positive_int, default=512)
    parser.add_argument("--angles", type=positive_int, default=128)
    add_iterations(parser, 10)
    parser.add_argument("--repetitions", type=positive_int, default=3)
    parser.add_argument("--identical", type=positive_int, default=5)
    parser.add_argument("--tolerances", type=float, nargs="+", default=[0.05, 0.1, 0.2, 0.5])
    parser.add_argument("--image", default=None, help="podman image for the host comparison")
    parser.add_argument("--folder", type=Path, default=None,
                        help="keep the campaigns here (default: a temporary folder); campaigns "
                        "already there are compared again, not re-run")
    args = parser.parse_args(argv)
    folder = args.folder or Path(tempfile.mkdtemp(prefix="compare-environments-"))
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "ct.yml").write_text(_config(args.size, args.angles, args.iterations,
                                           args.repetitions))
    shutil.copytree(INFERENCE.path, folder / INFERENCE.folder,
                    ignore=shutil.ignore_patterns("outputs", "__pycache__"), dirs_exist_ok=True)
    identical = [_run(folder, f"cores2_{i}", []) for i in range(args.identical)]
    one_core = _run(folder, "core1", ["taskset", "-c", "0"])
    print(f"CT {args.size}², {args.angles} angles, PnP-TV, {args.iterations} iterations, "
          f"{args.repetitions} repetitions; results in {folder}\n")
    alarms, tolerance = false_alarms(identical, args.tolerances)
    print("\n".join([
        f"### {args.identical} identical campaigns on every core: false alarms", "", *alarms,
        *_pair_section(f"taskset -c 0 (base) against every core (candidate), tolerance "
                       f"{tolerance:.0%}", _compare(one_core, identical[0], tolerance)),
        *podman_section(folder, args.image, identical[0], tolerance)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
