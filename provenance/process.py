"""What the current process runs on: ``collect()`` reads it once and caches it.

Reading never raises: a field that cannot be read gets its "unknown" value, is listed in
``missing`` and makes ``complete`` false. Only allow-listed environment variables are read.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import platform
import socket
import subprocess
import sys
from importlib import metadata
from pathlib import Path
from typing import Any

from provenance.schema import SCHEMA_VERSION
from provenance.sif import SifError, sif_digest

ENV_ALLOWLIST_PREFIXES = ("NCCL_",)
ENV_ALLOWLIST = ("CUBLAS_WORKSPACE_CONFIG", "OMP_NUM_THREADS", "MKL_NUM_THREADS", "MKL_CBWR",
                 "MKL_DYNAMIC", "OPENBLAS_NUM_THREADS", "CUDA_VISIBLE_DEVICES",
                 "CUDA_LAUNCH_BLOCKING", "PYTHONHASHSEED", "TORCH_HOME",
                 "SCALEBENCH_IMAGE_DIGEST", "SCALEBENCH_OFFLINE", "HF_HUB_OFFLINE")
# Build information baked into container images at build time (commit, dirty flag, diff hash).
BUILD_INFO_PATHS = ("/opt/scalebench/build-info.json",)
APPTAINER_LABELS = Path("/.singularity.d/labels.json")
CODE_ROOT = Path(__file__).resolve().parent.parent
# The numerical stack: provenance field -> distribution. Every row records their versions, and
# the images label them and print them (containers/generate.py, containers/image_info.py).
PACKAGES = {"torch": "torch", "torchvision": "torchvision", "deepinv": "deepinv",
            "benchopt": "benchopt", "astra": "astra-toolbox", "numpy": "numpy"}


class _Reader:
    """Collects fields, remembering which ones could not be read."""

    def __init__(self) -> None:
        self.record: dict[str, Any] = {}
        self.missing: list[str] = []

    def read(self, field: str, function, unknown: Any) -> None:
        try:
            self.record[field] = function()
        except Exception:  # a provenance read must never break a run
            self.record[field] = unknown
            self.missing.append(field)


def _sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as stream:
        for block in iter(lambda: stream.read(1 << 22), b""):
            digest.update(block)
    return digest.hexdigest()


def _running_sif() -> str | None:
    return os.environ.get("APPTAINER_CONTAINER") or os.environ.get("SINGULARITY_CONTAINER")


def hand_down_image_digest() -> None:
    """Inside a SIF, take its digest once into SCALEBENCH_IMAGE_DIGEST, which the processes
    started from here inherit: each rank would otherwise hash the whole SIF again (seconds per
    gigabyte). Left unset when the SIF cannot be read: each process then says why."""
    sif = _running_sif()
    if sif and not os.environ.get("SCALEBENCH_IMAGE_DIGEST"):
        try:
            os.environ["SCALEBENCH_IMAGE_DIGEST"] = sif_digest(sif)
        except (SifError, OSError):
            pass


def image_identity() -> tuple[str, str]:
    """(digest, labels JSON) of the container image the process runs in."""
    handed_in = os.environ.get("SCALEBENCH_IMAGE_DIGEST")
    sif = _running_sif()
    labels = {}
    if APPTAINER_LABELS.is_file():
        labels = json.loads(APPTAINER_LABELS.read_text())
    labels_file = os.environ.get("SCALEBENCH_IMAGE_LABELS")
    if labels_file:
        labels = json.loads(Path(labels_file).read_text())
    # A Docker/podman container cannot read its own labels: the launch helper hands them in.
    if os.environ.get("SCALEBENCH_IMAGE_LABELS_JSON"):
        labels = json.loads(os.environ["SCALEBENCH_IMAGE_LABELS_JSON"])
    if handed_in:
        digest = handed_in
    elif sif:
        digest = sif_digest(sif)  # what verify-image checks and a rebuild reproduces
    else:
        digest = "none"
    return digest, json.dumps(labels, sort_keys=True)


def code_state(root: Path = CODE_ROOT) -> dict[str, Any]:
    """Commit, dirty flag and diff hash: from the image's build info, else from git."""
    for candidate in (os.environ.get("SCALEBENCH_BUILD_INFO"), *BUILD_INFO_PATHS):
        if candidate and Path(candidate).is_file():
            info = json.loads(Path(candidate).read_text())
            return {"code_commit": str(info["commit"]), "code_dirty": bool(info["dirty"]),
                    "code_diff_sha256": str(info.get("diff_sha256", ""))}

    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True,
                              check=True, timeout=10).stdout

    commit = git("rev-parse", "HEAD").strip()
    diff = git("diff", "HEAD", "--binary")
    untracked = git("ls-files", "--others", "--exclude-standard")
    dirty = bool(diff or untracked)
    diff_hash = ""
    if dirty:
        digest = hashlib.sha256(diff.encode())
        for name in sorted(untracked.splitlines()):
            digest.update(name.encode())
            digest.update(_sha256_file(root / name).encode())
        diff_hash = digest.hexdigest()
    return {"code_commit": commit, "code_dirty": dirty, "code_diff_sha256": diff_hash}


def _text(value: str | bytes) -> str:
    return value.decode() if isinstance(value, bytes) else value


def visible_indices(uuids: list[str], visible: str | None, numbered: int | None = None
                    ) -> list[int]:
    """Positions in ``uuids`` of the devices this process sees.

    ``uuids``: the GPUs in NVML's order, then any MIG instances; ``numbered``: how many of
    them are whole GPUs that a number may name (default: all). ``visible`` is
    CUDA_VISIBLE_DEVICES (None: unset, every whole GPU): numbers, taken in NVML's (PCI bus)
    order, which is CUDA's with CUDA_DEVICE_ORDER=PCI_BUS_ID and differs from CUDA's default
    only on nodes mixing GPU models, or UUID prefixes ("GPU-...", "MIG-..."); as CUDA does,
    the list ends at the first entry that names no device.
    """
    numbered = len(uuids) if numbered is None else numbered
    if visible is None:
        return list(range(numbered))
    indices: list[int] = []
    for entry in (item.strip() for item in visible.split(",")):
        if entry.isdigit() and int(entry) < numbered:
            match = int(entry)
        else:
            matches = [i for i, uuid in enumerate(uuids) if entry and uuid.startswith(entry)]
            if len(matches) != 1:
                break
            match = matches[0]
        if match in indices:
            break
        indices.append(match)
    return indices


def _gpus() -> dict[str, Any]:
    import pynvml

    pynvml.nvmlInit()
    try:
        handles = [pynvml.nvmlDeviceGetHandleByIndex(i)
                   for i in range(pynvml.nvmlDeviceGetCount())]
        # Whole GPUs first, then the MIG instances a UUID in CUDA_VISIBLE_DEVICES may name.
        devices = handles + [mig for h in handles for mig in _mig_handles(pynvml, h)]
        uuids = [_text(pynvml.nvmlDeviceGetUUID(h)) for h in devices]
        names = [_text(pynvml.nvmlDeviceGetName(h)) for h in devices]
        driver = _text(pynvml.nvmlSystemGetDriverVersion())
    finally:
        pynvml.nvmlShutdown()
    # The devices this process can use, as the schema says: CUDA_VISIBLE_DEVICES applies.
    visible = visible_indices(uuids, os.environ.get("CUDA_VISIBLE_DEVICES"), len(handles))
    return {"gpu_models": ",".join(names[i] for i in visible) or "none",
            "gpu_count": len(visible), "gpu_driver": driver}


def _mig_handles(pynvml, handle) -> list:
    """NVML handles of a GPU's MIG instances (none when MIG is off or unsupported)."""
    try:
        slots = pynvml.nvmlDeviceGetMaxMigDeviceCount(handle)
    except pynvml.NVMLError:
        return []
    found = []
    for slot in range(slots):
        try:
            found.append(pynvml.nvmlDeviceGetMigDeviceHandleByIndex(handle, slot))
        except pynvml.NVMLError:  # an empty slot
            continue
    return found


def _no_gpu() -> bool:
    """True when there is certainly no NVIDIA driver (NVML cannot be loaded)."""
    import pynvml

    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError_LibraryNotFound:
        return True
    except pynvml.NVMLError_DriverNotLoaded:
        return True
    pynvml.nvmlShutdown()
    return False


NO_TORCH = {"cuda_runtime": "none", "cudnn": "none", "nccl": "none", "torch_threads": 0,
            "deterministic_algorithms": False, "cudnn_deterministic": False,
            "cudnn_benchmark": False, "tf32_matmul": False}


def _torch_state() -> dict[str, Any]:
    """Build and switches of torch, if the process uses it (never imported from here)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return dict(NO_TORCH)
    cudnn = torch.backends.cudnn.version() if torch.backends.cudnn.is_available() else None
    try:
        nccl = ".".join(map(str, torch.cuda.nccl.version())) if torch.cuda.is_available() \
            else "none"
    except (AttributeError, RuntimeError):
        nccl = "none"
    return {
        "cuda_runtime": torch.version.cuda or "none",
        "cudnn": str(cudnn) if cudnn else "none",
        "nccl": nccl,
        "torch_threads": torch.get_num_threads(),
        "deterministic_algorithms": torch.are_deterministic_algorithms_enabled(),
        "cudnn_deterministic": bool(torch.backends.cudnn.deterministic),
        "cudnn_benchmark": bool(torch.backends.cudnn.benchmark),
        "tf32_matmul": bool(torch.backends.cuda.matmul.allow_tf32),
    }


def _cpu_model() -> str:
    for line in Path("/proc/cpuinfo").read_text().splitlines():
        if line.startswith("model name"):
            return line.split(":", 1)[1].strip()
    return platform.processor() or platform.machine()


def allowed_environment() -> dict[str, str]:
    """The allow-listed environment variables, and nothing else."""
    return {key: value for key, value in sorted(os.environ.items())
            if key in ENV_ALLOWLIST or key.startswith(ENV_ALLOWLIST_PREFIXES)}


def _topology() -> dict[str, int]:
    """The rank and world of this process, as torch's process group reads them: every
    scalebench rank has them set, by its launcher or, for a task SLURM started itself, from
    SLURM's task variables (scalebench.launch.rank_env) before any row is stamped."""
    env = os.environ
    return {"world_size": int(env.get("WORLD_SIZE") or 1),
            "ranks_per_node": int(env.get("LOCAL_WORLD_SIZE") or 1),
            "rank": int(env.get("RANK") or 0)}


def _preflight() -> str:
    """The job's pre-flight record (a JSON file named by SCALEBENCH_PREFLIGHT), or '{}'."""
    path = os.environ.get("SCALEBENCH_PREFLIGHT")
    if not path:
        return "{}"
    return json.dumps(json.loads(Path(path).read_text()), sort_keys=True)


def _version(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "absent"


def _slurm() -> dict[str, str]:
    names = {"slurm_job_id": "SLURM_JOB_ID", "slurm_step_id": "SLURM_STEP_ID",
             "slurm_array_task_id": "SLURM_ARRAY_TASK_ID",
             "slurm_restart_count": "SLURM_RESTART_COUNT",
             "slurm_nodelist": "SLURM_JOB_NODELIST"}
    return {field: os.environ.get(var, "") for field, var in names.items()}


def _read_all() -> dict[str, Any]:
    reader = _Reader()
    reader.read("image", image_identity, ("unknown", "{}"))
    reader.read("code", code_state, {"code_commit": "unknown", "code_dirty": True,
                                     "code_diff_sha256": ""})
    reader.read("gpus", lambda: {"gpu_models": "none", "gpu_count": 0, "gpu_driver": "none"}
                if _no_gpu() else _gpus(),
                {"gpu_models": "unknown", "gpu_count": 0, "gpu_driver": "unknown"})
    reader.read("torch_state", _torch_state, dict(NO_TORCH))
    reader.read("cpu_model", _cpu_model, "unknown")
    reader.read("hostname", socket.gethostname, "unknown")
    reader.read("topology", _topology, {"world_size": 1, "ranks_per_node": 1, "rank": 0})
    reader.read("preflight", _preflight, "{}")
    raw = reader.record
    record: dict[str, Any] = {"schema_version": SCHEMA_VERSION}
    record["image_digest"], record["image_labels"] = raw.pop("image")
    for group in ("code", "gpus", "torch_state", "topology"):
        record.update(raw.pop(group))
    record.update(raw)
    record.update(_slurm())
    record["python"] = platform.python_version()
    record.update({field: _version(dist) for field, dist in PACKAGES.items()})
    record["env"] = json.dumps(allowed_environment(), sort_keys=True)
    record["missing"] = ",".join(reader.missing)
    record["complete"] = not reader.missing
    return record


@functools.cache
def _cached() -> dict[str, Any]:
    return _read_all()


def collect(refresh: bool = False) -> dict[str, Any]:
    """The process-level provenance record (a copy); read once per process unless refresh.

    The torch switches (threads, deterministic flags) are read again at every call, since a
    run may change them after the first read.
    """
    if refresh:
        _cached.cache_clear()
    record = dict(_cached())
    if "torch" in sys.modules:
        record.update(_torch_state())
    return record
