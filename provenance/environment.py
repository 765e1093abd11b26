"""The environment a run ran in: hardware, drivers, threads, ranks, image, commit, packages
and modes, as the ``prov_*`` fields of its rows say.

One definition for the report (runs of one experiment in two environments are a series, not
duplicates; labels name the fields that differ) and for ``scalebench compare``. Host names,
job ids and dates are shown beside an environment but are no part of it: two nodes of one
partition are one environment. Pure functions over row records (mappings of ``prov_<field>``
to values); imports no torch and nothing of scalebench.
"""

from __future__ import annotations

import hashlib
import json
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence

from provenance.process import PACKAGES
from provenance.schema import column

# Field -> short name in labels; the order is the order labels and tables list them in.
ENVIRONMENT_FIELDS: dict[str, str] = {
    "gpu_models": "gpus", "gpu_count": "gpu count", "gpu_driver": "driver",
    "cuda_runtime": "cuda", "cudnn": "cudnn", "nccl": "nccl",
    "cpu_model": "cpu", "torch_threads": "threads",
    "world_size": "ranks", "ranks_per_node": "ranks/node",
    "image_digest": "image", "code_commit": "commit", "code_dirty": "dirty",
    "code_diff_sha256": "diff", "python": "python",
    **{field: field for field in PACKAGES},
    "env": "env", "profiler_mode": "profiler", "deterministic_mode": "deterministic",
    "deterministic_algorithms": "deterministic algorithms",
    "cudnn_deterministic": "cudnn deterministic", "cudnn_benchmark": "cudnn benchmark",
    "tf32_matmul": "tf32",
}
# Fields a scaling series varies on purpose: one environment on several world sizes.
RESOURCE_FIELDS = ("world_size", "ranks_per_node")
# Shown beside an environment, never part of it: where and when a run ran.
SHOWN_FIELDS = ("hostname", "rank_hosts", "slurm_job_id", "slurm_nodelist")
# Fields whose difference can change an estimate's bits: ``scalebench replay`` compares them
# before a bit-for-bit comparison (the image, code and its uncommitted changes, GPUs and their
# driver, ranks and threads, the numerical packages, the CPU: tomography's projector 'auto'
# follows ASTRA's presence). A subset of ENVIRONMENT_FIELDS.
RESULT_FIELDS = ("image_digest", "code_commit", "gpu_models", "gpu_driver", "world_size",
                 "torch_threads", "code_dirty", "code_diff_sha256", "torch", "deepinv",
                 "benchopt", "numpy", "astra", "cpu_model")
# Values that are digests: labels show their first characters.
DIGESTS = ("image_digest", "code_commit", "code_diff_sha256")
SHORT_DIGEST = 7
# A label names at most this many differing fields (the environments view lists them all).
LABEL_FIELDS = 3
NO_IMAGE = "none"  # image_digest on bare metal
# Allow-listed variables (the 'env' field) that say where, not with what: which GPUs SLURM
# handed a job, a cache folder, the image digest already compared as its own field.
ENV_NOT_ENVIRONMENT = ("CUDA_VISIBLE_DEVICES", "TORCH_HOME", "SCALEBENCH_IMAGE_DIGEST")


def value_text(value: object) -> str:
    """A field value as text, the same whatever a table made of it: a missing value is '',
    a whole float (an integer column merged with a file lacking it) prints as an integer."""
    if value is None or (isinstance(value, float) and math.isnan(value)):
        return ""
    if isinstance(value, bool) or type(value).__name__ == "bool_":
        return str(bool(value)).lower()
    if isinstance(value, numbers.Real) and not isinstance(value, numbers.Integral):
        value = float(value)
        return str(int(value)) if value.is_integer() else f"{value:g}"
    return str(value)


def field_text(field: str, value: object) -> str:
    """``value_text`` of a field; the 'env' field without ENV_NOT_ENVIRONMENT."""
    text = value_text(value)
    if field != "env" or not text:
        return text
    try:
        variables = json.loads(text)
    except ValueError:
        return text
    return json.dumps({k: v for k, v in variables.items() if k not in ENV_NOT_ENVIRONMENT},
                      sort_keys=True)


def environment(record: Mapping[str, object]) -> dict[str, str]:
    """The environment of a row record (``prov_*`` keys): field -> text, the fields the
    record holds."""
    return {field: field_text(field, record[column(field)]) for field in ENVIRONMENT_FIELDS
            if column(field) in record}


def environment_key(record: Mapping[str, object]) -> str:
    """A short digest of the record's environment: equal environments, equal keys."""
    text = json.dumps(environment(record), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def differing_fields(records: Sequence[Mapping[str, object]],
                     fields: Iterable[str] = ENVIRONMENT_FIELDS) -> dict[str, list[str]]:
    """Fields whose values differ between ``records``: field -> each record's value, in the
    order of ``records`` (a record without the field gives '')."""
    found = {}
    for field in fields:
        values = [field_text(field, r.get(column(field))) for r in records]
        if len(set(values)) > 1:
            found[field] = values
    return found


def short_value(field: str, value: str) -> str:
    """How a label shows ``value`` of ``field``: digests cut short, no image as 'host'."""
    if field == "image_digest":
        return "host" if value in (NO_IMAGE, "") else \
            value.removeprefix("sha256:")[:SHORT_DIGEST] + "…"
    if field in DIGESTS:
        return value[:SHORT_DIGEST] if value else "-"
    return value


def field_label(field: str, value: str) -> str:
    """One differing field in a label: ``threads=1``, ``image 3f2a1b0…``, ``image host``,
    ``commit d5adff2``."""
    name = ENVIRONMENT_FIELDS.get(field, field)
    if field in DIGESTS:
        return f"{name} {short_value(field, value)}"
    return f"{name}={short_value(field, value)}"


def environment_labels(records: Sequence[Mapping[str, object]]) -> list[str]:
    """Per record, the fields that differ between ``records`` as a short label ('' when all
    environments are one); past LABEL_FIELDS fields, '+N more'."""
    differences = differing_fields(records)
    labels = []
    for index in range(len(records)):
        parts = [field_label(field, values[index]) for field, values in differences.items()]
        extra = len(parts) - LABEL_FIELDS
        labels.append(" ".join(parts[:LABEL_FIELDS]) + (f" +{extra} more" if extra > 0 else ""))
    return labels
