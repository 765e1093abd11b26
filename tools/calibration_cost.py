"""What calibrating a campaign costs, this tree against an earlier commit: the wall time of
``scalebench capacity --quick`` over the CT half of configs/examples/methods.yml with TV
(tools.time_check's campaign: seven PnP algorithms, CGLS, two FBP filters), each code in a
fresh cache, the two side by side in alternation (``--repeats`` pairs: the machine's load
falls on both alike), and the probes each ran. Target: this tree's median at most 1.2 times
the earlier commit's (the time model may not make calibration dearer; a family sharing its
probes makes it cheaper).

``--pnp-only``: its seven PnP experiments alone (commits before the time model size no solver
without a denoiser).

    python -m tools.calibration_cost [--against a99901d^] [--repeats 1] [--campaign-size 256]
        [--pnp-only]
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from scalebench.repository import REPO
from tools.measuring import (
    Stopwatch,
    Table,
    load_text,
    median,
    print_targets,
    tool_parser,
    write_config,
)
from tools.time_check import campaign_config

TARGET = 1.2
# Before the time model: the last commit whose probes kept no timings.
BEFORE_TIME_MODEL = "a99901d^"


def calibrate(tree: Path, config: Path, cache: Path) -> tuple[float, list[dict]]:
    """``scalebench capacity --quick`` of ``config`` with the code of ``tree`` into ``cache``:
    its wall seconds and its JSON lines."""
    env = {**os.environ, "PYTHONPATH": str(tree), "SCALEBENCH_CACHE": str(cache)}
    command = [sys.executable, "-m", "scalebench", "capacity", str(config), "--memory", "2GiB",
               "--quick", "--format", "json"]
    with Stopwatch() as watch:
        done = subprocess.run(command, cwd=tree, env=env, capture_output=True, text=True,
                              check=False)
    if done.returncode != 0:
        raise SystemExit(f"{tree}: scalebench capacity failed: {done.stderr.strip()[-500:]}")
    return watch.seconds, json.loads(done.stdout)


def probe_count(lines: list[dict]) -> int:
    """The probes the calibrations ran themselves: each line's, less those borrowed, once
    per calibration (lines of one configuration on several rank counts share one)."""
    seen: dict[str, int] = {}
    for line in lines:
        seen[json.dumps(line["configuration"], sort_keys=True)] = \
            len(line["probes"]) - line.get("shared_probes", 0)
    return sum(seen.values())


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, __file__)
    parser.add_argument("--against", default=BEFORE_TIME_MODEL,
                        help=f"the earlier commit (default {BEFORE_TIME_MODEL}: before the time "
                             "model)")
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--campaign-size", type=int, default=256)
    parser.add_argument("--pnp-only", action="store_true",
                        help="the campaign's PnP experiments alone")
    args = parser.parse_args(argv)
    folder = Path(tempfile.mkdtemp(prefix="calibration-cost-"))
    earlier = folder / "earlier"
    subprocess.run(["git", "worktree", "add", "--detach", str(earlier), args.against],
                   cwd=REPO, check=True, capture_output=True)
    try:
        config = campaign_config(folder, args.campaign_size, 40)
        if args.pnp_only:
            document = yaml.safe_load(config.read_text())
            document["solver"] = [entry for entry in document["solver"] if "pnp" in entry]
            write_config(config, document)
        walls: dict[str, list[float]] = {"this tree": [], args.against: []}
        probes: dict[str, int] = {}
        for repeat in range(args.repeats):
            for name, tree in (("this tree", REPO), (args.against, earlier)):
                seconds, lines = calibrate(tree, config, folder / f"cache-{name}-{repeat}")
                walls[name].append(seconds)
                probes[name] = probe_count(lines)
                print(f"{name}: {seconds:.0f} s, {probes[name]} probes, "
                      f"{len(lines)} lines", flush=True)
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", str(earlier)], cwd=REPO,
                       check=False, capture_output=True)
    table = Table("code", "calibration wall s (median)", "probes run", "load after")
    table.header()
    load = load_text()
    for name in walls:
        table.row(name, f"{median(walls[name]):.0f}", probes[name], load)
    ratio = median(walls["this tree"]) / median(walls[args.against])
    return print_targets([(f"campaign calibration wall time, this tree / {args.against} "
                           f"(at most {TARGET})", ratio <= TARGET, f"{ratio:.3f}")])


if __name__ == "__main__":
    sys.exit(main())
