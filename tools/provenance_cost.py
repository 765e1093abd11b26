"""Cost of provenance: collect() in a fresh process, and stamping 100,000 rows.

Prints seconds and the targets: collect() under 0.2 s (first call in a process that has
already imported torch, as a benchmark worker has), stamping 100,000 rows under 2 s (every
row's prov_* fields as the objective computes them, then the publishing pass that renames the
columns and writes the file-level record). benchopt's own prefixing of the extra keys it is
handed is timed separately, for information.

    python -m tools.provenance_cost [--rows 100000]
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
from pathlib import Path

import yaml

from tools.measuring import Stopwatch, tool_parser

COLLECT_TARGET_S, STAMP_TARGET_S = 0.2, 2.0
_FRESH_COLLECT = ("import time, torch, provenance; t = time.perf_counter(); "
                  "provenance.collect(); print(time.perf_counter() - t)")


def collect_seconds() -> float:
    output = subprocess.run([sys.executable, "-c", _FRESH_COLLECT], capture_output=True,
                            text=True, check=True).stdout
    return float(output.strip().splitlines()[-1])


def stamping_seconds(rows: int) -> tuple[float, float, float]:
    """Seconds to compute every row's fields, for benchopt to prefix them, to publish."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq
    import torch

    from provenance.results import finalize
    from scalebench.benchmarks import INFERENCE
    from scalebench.loops.inference_parameters import PNP_PARAMS
    from scalebench.param_spec import resolved_parameters
    from scalebench.problems import build_problem
    from scalebench.rank.context import run_context
    from scalebench.rank.stamping import row_provenance, run_provenance

    problem = build_problem("synthetic", image_size=16, task="denoising")
    record = run_provenance(problem.source, "0" * 64, "pnp",
                            resolved_parameters({}, PNP_PARAMS), run_context(torch.device("cpu")),
                            INFERENCE.folder, INFERENCE.objective)
    estimate = torch.zeros(1, 1, 16, 16)
    with Stopwatch() as compute:
        fields = [row_provenance(record, estimate) for _ in range(rows)]
    with Stopwatch() as prefixing:
        stamped = [{"solver_name": "pnp", "dataset_name": "synthetic", "objective_name": "o",
                    "stop_val": i, "idx_rep": 0, **{f"objective_{k}": v for k, v in row.items()}}
                   for i, row in enumerate(fields)]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "rows.parquet"
        pq.write_table(pa.Table.from_pandas(pd.DataFrame(stamped)), path)
        with Stopwatch() as publish:
            finalize(path)
    return compute.seconds, prefixing.seconds, publish.seconds


def main(argv: list[str] | None = None) -> None:
    parser = tool_parser(__doc__, __file__)
    parser.add_argument("--rows", type=int, default=100_000)
    args = parser.parse_args(argv)
    collect = collect_seconds()
    compute, prefixing, publish = stamping_seconds(args.rows)
    print(yaml.safe_dump({
        "collect_first_call_s": round(collect, 4),
        "collect_target_s": COLLECT_TARGET_S,
        "rows": args.rows,
        "stamp_rows_s": round(compute, 3),
        "publish_file_s": round(publish, 3),
        "benchopt_prefixing_s (information)": round(prefixing, 3),
        "stamp_total_s": round(compute + publish, 3),
        "stamp_target_s": STAMP_TARGET_S,
        "within_targets": bool(collect < COLLECT_TARGET_S
                               and compute + publish < STAMP_TARGET_S),
    }, sort_keys=False))


if __name__ == "__main__":
    main()
