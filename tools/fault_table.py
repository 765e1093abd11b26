"""The fault table of docs/reliability.md, measured: each fault a launch meets on one machine,
done at a chosen moment of a real launch (EXPERIMENTS tiny CT experiments of 2 iterations),
with the exit status, the line printed, the rows the results file kept against those
expected, and the exit status and wall time of the command that goes on (`--resume`).

Faults: a full results disk (a 24 MiB tmpfs filled after the first publish, while experiment
2's rank runs, while experiment 2 is published), a full cache (SCALEBENCH_CACHE on a full
tmpfs), SIGTERM during experiment 2 (what `scancel` sends), rank 1 killed with SIGKILL during
experiment 2 (2 ranks), and `--resume` of a truncated results file. The tmpfs is mounted in a
user and mount namespace of its own (tests.support.full_disk), so no root is needed; where user
namespaces are disabled the tmpfs faults are left out, saying so.

    python -m tools.fault_table [--folder DIR]
"""

from __future__ import annotations

import os
import shlex
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import pyarrow.parquet as pq

from scalebench.repository import REPO as ROOT
from tests.support.cli import descendants
from tests.support.full_disk import (
    MOMENTS,
    NotMountable,
    SmallDisk,
    during_second_run,
    run_acting,
    run_filling,
    small_tmpfs,
)
from tools.measuring import (
    Stopwatch,
    Table,
    launch_command,
    private_benchmark,
    tool_parser,
    write_config,
)

EXPERIMENTS = 4
ROWS = 3  # rows of one experiment: its 2 iterations and the initial estimate
NAME = "t"


def config_document() -> dict:
    return {"objective": ["imaging_inverse_problem"],
            "dataset": [{"tomography_2d": {"image_size": 32, "num_angles": 12,
                                           "num_operators": 2, "noise_level": 0.05}}],
            "solver": [{"pnp": {"max_iter": 2, "device": "cpu", "denoiser_sigma": 0.002,
                                "distribute_physics": True,
                                "seed": list(range(EXPERIMENTS))}}],
            "n-repetitions": 1, "max-runs": 100, "timeout": 300}


def error_line(done: subprocess.CompletedProcess) -> str:
    """The line the launch ended with (its last ``scalebench`` line on stderr)."""
    lines = [line for line in done.stderr.splitlines() if line.startswith(("scalebench: ",
                                                                            "[scalebench] "))]
    return lines[-1] if lines else "(none)"


def kept_rows(final: Path) -> int:
    return pq.read_metadata(final).num_rows if final.is_file() else 0


def go_on(command: list[str], final: Path, disk: SmallDisk | None) -> tuple[int, float, int]:
    """The command that goes on (in ``disk``'s namespace, if any): its exit status, wall
    time, and the rows of the file it writes (``final``, or the one its --output and
    --outputs name)."""
    with Stopwatch() as watch:
        done = subprocess.run(disk.command(command, ROOT) if disk else command, cwd=ROOT,
                              capture_output=True, text=True, check=False)
    if "--outputs" in command:
        final = Path(command[command.index("--outputs") + 1]) / \
            f"{command[command.index('--output') + 1]}.parquet"
    return done.returncode, watch.seconds, kept_rows(disk.reach(final) if disk else final)


def row(table: Table, fault: str, done: subprocess.CompletedProcess, final: Path,
        command: list[str] | None, disk: SmallDisk | None = None) -> None:
    """The fault's row; ``final`` and ``command`` as the launch saw them (in ``disk``'s
    namespace, if any)."""
    kept = kept_rows(disk.reach(final) if disk else final)
    status, wall, after = go_on(command, final, disk) if command else (None, 0.0, kept)
    went_on = f"exit {status}, {wall:.1f} s, {after}/{EXPERIMENTS * ROWS} rows" \
        if command else "-"
    table.row(fault, done.returncode, f"`{error_line(done)}`",
              f"{kept}/{EXPERIMENTS * ROWS}", went_on)


def resume_of(line: str) -> list[str] | None:
    """The command a full disk's line prints, as arguments."""
    for marker in ("resume with: ", "run again with: "):
        if marker in line:
            return shlex.split(line.split(marker, 1)[1])
    return None


def full_disk_rows(table: Table, folder: Path, config: Path, benchmark: Path) -> None:
    for moment, when in MOMENTS.items():
        with small_tmpfs(folder / "disk") as disk:
            command = launch_command(config, benchmark, NAME,
                                     options=["--outputs", disk.folder])
            done = run_filling(command, disk, when(disk.here, NAME), ROOT)
            disk.free()
            row(table, f"full results disk, {moment}", done, disk.folder / f"{NAME}.parquet",
                resume_of(error_line(done)), disk)
    with small_tmpfs(folder / "cache") as cache:
        cache.fill()
        outputs = folder / "cache-results"
        env = {**os.environ, "SCALEBENCH_CACHE": str(cache.folder / "scalebench")}
        command = launch_command(config, benchmark, NAME, options=["--outputs", outputs])
        done = subprocess.run(cache.command(command, ROOT), cwd=ROOT, env=env,
                              capture_output=True, text=True, check=False)
        cache.free()
        row(table, "full cache", done, outputs / f"{NAME}.parquet", resume_of(error_line(done)),
            cache)


def signal_rows(table: Table, folder: Path, config: Path, benchmark: Path) -> None:
    outputs = benchmark / "outputs"
    for fault, nproc, action in (("SIGTERM during experiment 2 (scancel)", 1, _terminate),
                                 ("rank 1 killed during experiment 2", 2, _kill_rank_1)):
        name = f"{NAME}{nproc}"
        command = launch_command(config, benchmark, name, nproc)
        done = run_acting(command, during_second_run(outputs, name), action, ROOT)
        row(table, fault, done, outputs / f"{name}.parquet", [*command, "--resume"])


def _terminate(process: subprocess.Popen) -> None:
    process.send_signal(signal.SIGTERM)


def _kill_rank_1(process: subprocess.Popen) -> None:
    """SIGKILL to rank 1's benchopt worker."""
    worker = _worker(process.pid, _is_rank_1_worker)
    os.kill(worker, signal.SIGKILL)


def _worker(root: int, test: Callable[[int], bool]) -> int:
    for _ in range(3000):
        found = next((pid for pid in descendants(root) if test(pid)), None)
        if found is not None:
            return found
        time.sleep(0.01)
    raise RuntimeError("rank 1's benchopt worker was not found")


def _is_rank_1_worker(pid: int) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes()
        environ = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return False
    return b"scalebench.benchopt_glue" in command and b"RANK=1" in environ


def bad_resume_row(table: Table, folder: Path, config: Path, benchmark: Path) -> None:
    outputs = folder / "bad"
    outputs.mkdir(exist_ok=True)
    done = subprocess.run(launch_command(config, benchmark, NAME, options=["--outputs",
                                                                            outputs]),
                          cwd=ROOT, capture_output=True, text=True, check=False)
    final = outputs / f"{NAME}.parquet"
    if done.returncode != 0:
        raise RuntimeError(done.stderr[-3000:])
    final.write_bytes(final.read_bytes()[: final.stat().st_size // 2])
    refused = subprocess.run(launch_command(config, benchmark, NAME, options=[
        "--outputs", outputs, "--resume"]), cwd=ROOT, capture_output=True, text=True,
        check=False)
    table.row("--resume of a truncated results file", refused.returncode,
              f"`{error_line(refused)}`", "file untouched", "-")


def main(argv: list[str] | None = None) -> int:
    parser = tool_parser(__doc__, __file__)
    parser.add_argument("--folder", type=Path, default=None,
                        help="working folder (default: a temporary one, removed)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="fault-table-") as temporary:
        folder = (args.folder or Path(temporary)).resolve()
        folder.mkdir(parents=True, exist_ok=True)
        benchmark = private_benchmark(folder)
        config = write_config(folder / "faults.yml", config_document())
        table = Table("fault", "exit status", "line printed", "rows kept/expected",
                      "going on: exit, wall time, rows")
        table.header()
        try:
            full_disk_rows(table, folder, config, benchmark)
        except NotMountable as reason:
            print(f"full disk and full cache left out: {reason}", file=sys.stderr)
        signal_rows(table, folder, config, benchmark)
        bad_resume_row(table, folder, config, benchmark)
    return 0


if __name__ == "__main__":
    sys.exit(main())
