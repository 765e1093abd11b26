"""The provenance columns: one flat ``prov_<field>`` column per field, with its type.

Per-process fields come from ``collect()``, computed in the process that produced the row;
per-run fields (config, seeds, data, profiler) and the per-row result digest come from the
run itself. The full record is also stored as JSON in the parquet file's key-value metadata
under ``METADATA_KEY``.
"""

SCHEMA_VERSION = 3  # 3: the weights fields (weights, weights_sha256, denoiser_architecture)
COLUMN_PREFIX = "prov_"
METADATA_KEY = b"scalebench.provenance"
RUN_KEY = b"scalebench.run"  # the run status scalebench run records (scalebench.results.store)
# benchopt prefixes whatever the objective returns with "objective_".
BENCHOPT_PREFIX = "objective_" + COLUMN_PREFIX

# field -> (python type, meaning)
FIELDS: dict[str, tuple[type, str]] = {
    "schema_version": (int, "version of this column schema"),
    "complete": (bool, "false when some field could not be read (see 'missing')"),
    "missing": (str, "comma-separated fields that could not be read; empty when complete"),
    "image_digest": (str, "the SIF's sha256 with its build stamps zeroed (Apptainer), the "
                          "image ID handed in at launch (Docker/podman), or 'none' on bare "
                          "metal"),
    "image_labels": (str, "JSON of the container image labels; '{}' on bare metal"),
    "code_commit": (str, "git commit of the code (baked in at image build in a container)"),
    "code_dirty": (bool, "whether the code had uncommitted changes"),
    "code_diff_sha256": (str, "sha256 of the uncommitted diff; empty when clean"),
    "gpu_models": (str, "comma-separated model names of the visible GPUs; 'none' without"),
    "gpu_count": (int, "number of visible GPUs (CUDA_VISIBLE_DEVICES applied)"),
    "gpu_driver": (str, "NVIDIA driver version; 'none' without driver"),
    "cuda_runtime": (str, "CUDA runtime torch was built with; 'none' for CPU builds"),
    "cudnn": (str, "cuDNN version; 'none' when unavailable"),
    "nccl": (str, "NCCL version; 'none' when unavailable"),
    "cpu_model": (str, "CPU model name"),
    "hostname": (str, "host name of the process"),
    "slurm_job_id": (str, "SLURM_JOB_ID; empty outside SLURM"),
    "slurm_step_id": (str, "SLURM_STEP_ID"),
    "slurm_array_task_id": (str, "SLURM_ARRAY_TASK_ID"),
    "slurm_restart_count": (str, "SLURM_RESTART_COUNT"),
    "slurm_nodelist": (str, "SLURM_JOB_NODELIST"),
    "world_size": (int, "number of ranks of the run (WORLD_SIZE, else 1)"),
    "ranks_per_node": (int, "ranks per node (LOCAL_WORLD_SIZE, else 1)"),
    "rank": (int, "rank of the process that produced the row"),
    "rank_hosts": (str, "JSON list of where every rank ran (SLURM node name, else host "
                        "name), in rank order"),
    "preflight": (str, "JSON of the job's pre-flight check (topology, all-reduce bandwidth); "
                       "'{}' when none ran"),
    "python": (str, "Python version"),
    "torch": (str, "torch version; 'absent' when not installed"),
    "torchvision": (str, "torchvision version"),
    "deepinv": (str, "deepinv version"),
    "benchopt": (str, "benchopt version"),
    "numpy": (str, "numpy version"),
    "astra": (str, "astra-toolbox version"),
    "torch_threads": (int, "torch intra-op threads"),
    "deterministic_algorithms": (bool, "torch.use_deterministic_algorithms in force"),
    "cudnn_deterministic": (bool, "torch.backends.cudnn.deterministic"),
    "cudnn_benchmark": (bool, "torch.backends.cudnn.benchmark"),
    "tf32_matmul": (bool, "torch.backends.cuda.matmul.allow_tf32"),
    "env": (str, "JSON of the allow-listed environment variables (never anything else)"),
    "profiler_mode": (str, "profiler mode of the run"),
    "deterministic_mode": (bool, "whether the run asked for deterministic mode"),
    "seeds": (str, "JSON of every seed of the run"),
    "data_sha256": (str, "sha256 of the data manifest: ground truth and measurements"),
    "config_hash": (str, "sha256 of config_json"),
    "config_json": (str, "canonical JSON of the resolved experiment: enough to re-run it"),
    "weights": (str, "denoiser weights that ran: 'random' (seeded init, pretrained none), "
                     "'bundled' (scalebench's own), 'hub' (deepinv's published file), the "
                     "path of a weights file, or 'none' where none are loaded (TV, training)"),
    "weights_sha256": (str, "sha256 of the weights file; for random weights, of their "
                            "parameters; empty where none are loaded"),
    "denoiser_architecture": (str, "JSON of the denoiser network: name, class, widths, "
                                   "parameter count ('{}' where none is loaded)"),
    "result_sha256": (str, "sha256 of this row's estimate (dtype, shape, bytes)"),
}


def column(field: str) -> str:
    return COLUMN_PREFIX + field
