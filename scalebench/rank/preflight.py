"""Pre-flight check of a job, run on every rank before the benchmark.

Each rank reports its host, CPU count, visible GPUs and device; the ranks then time a few
all-reduces of ``--megabytes`` MB (device synchronised) and rank 0 writes one JSON record
(topology per rank, all-reduce seconds, algorithm and bus bandwidth) to ``--output`` and a
summary to the job log. The launcher hands that file to the ranks (SCALEBENCH_PREFLIGHT), so
every result row records it (``prov_preflight``).

    python -m scalebench.rank.preflight --output PATH [--megabytes 16] [--repeats 5]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from scalebench.rank.context import run_context
from scalebench.rank.devices import device_type


def topology() -> dict:
    """What this rank runs on."""
    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {"rank": int(os.environ.get("RANK", "0")), "host": socket.gethostname(),
            "cpus": os.cpu_count(), "gpus": gpus,
            "cuda_visible_devices": os.environ.get("CUDA_VISIBLE_DEVICES", "")}


def all_reduce_seconds(context, megabytes: float, repeats: int) -> list[float]:
    """Wall time of each all-reduce of ``megabytes`` MB of float32 (after one warm-up)."""
    values = torch.ones(int(megabytes * 2**20 / 4), device=context.device)
    times = []
    for attempt in range(repeats + 1):
        start = context.comm_time_s
        context.all_reduce(values)
        if attempt:
            times.append(context.comm_time_s - start)
    return times


def preflight(megabytes: float, repeats: int) -> dict:
    device = torch.device(device_type("auto"))
    context = run_context(device)
    ranks = [values[0] for values in context.gather_values([topology()])]
    record = {"world_size": context.world_size, "backend": dist.get_backend()
              if dist.is_initialized() else "none", "device": device.type, "ranks": ranks}
    if context.world_size > 1:
        times = all_reduce_seconds(context, megabytes, repeats)
        best = min(times)
        size = megabytes * 2**20
        record["all_reduce"] = {
            "megabytes": megabytes, "seconds": times, "best_s": best,
            "algorithm_gb_s": size / best / 1e9,
            "bus_gb_s": size / best / 1e9 * 2 * (context.world_size - 1) / context.world_size}
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m scalebench.rank.preflight")
    parser.add_argument("--output", type=Path, required=True, help="JSON record (rank 0)")
    parser.add_argument("--megabytes", type=float, default=16.0)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args(argv)
    record = preflight(args.megabytes, args.repeats)
    if record["ranks"][0]["rank"] == int(os.environ.get("RANK", "0")) == 0:
        args.output.parent.mkdir(parents=True, exist_ok=True)
        args.output.write_text(json.dumps(record, indent=1, sort_keys=True))
        hosts = sorted({rank["host"] for rank in record["ranks"]})
        reduce = record.get("all_reduce")
        speed = f", all-reduce {reduce['megabytes']:g} MB in {reduce['best_s'] * 1e3:.2f} ms " \
                f"(bus {reduce['bus_gb_s']:.2f} GB/s)" if reduce else ""
        print(f"[preflight] {record['world_size']} rank(s) on {len(hosts)} node(s) "
              f"({', '.join(hosts)}), {record['device']}, backend {record['backend']}{speed}",
              flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
