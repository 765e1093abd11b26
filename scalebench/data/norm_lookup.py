"""Whether a run will find its operator norm in the cache, known without torch: ``plan`` and
``scalebench run`` predict its set-up with the norm's computation only where it is not there.

The norm cache (scalebench.rank.operator_norm) keys an entry by what only a built problem
knows (its operators' classes and code, its tensors' dtype, torch's thread count). Each run
that reads or writes an entry also notes it under a key of what its config says
(``run_key``: the dataset and its recorded parameters, the device type and the solver's
``num_threads``), in ``cache_root()/operator_norms/runs/<key digest>.json``; a prediction
reads that note and checks that the entry it names still holds a norm. A projector whose code
changed since then reads as cached until the next run recomputes its norm (the entry's own
key, checked by the run, is the one trusted). Standard library only.
"""

from __future__ import annotations

import hashlib
import json
import math
from pathlib import Path

from provenance.files import write_text_atomically
from scalebench.data.cache import cache_root

NORMS_FOLDER = "operator_norms"  # the norm cache's folder in the cache root


def run_key(dataset: str, recorded_params: dict, device: str, num_threads: int) -> dict:
    """What a config says of the norm a run uses: its dataset with the parameters a run records
    (ProblemSpec.recorded), the device type it runs on ('cpu', 'cuda') and its solver's
    num_threads (0: the process's default)."""
    return {"dataset": dataset, "params": recorded_params, "device": device,
            "num_threads": int(num_threads)}


def norms_folder() -> Path:
    return cache_root() / NORMS_FOLDER


def note_path(key: dict) -> Path:
    digest = hashlib.sha256(json.dumps(key, sort_keys=True, default=str).encode()).hexdigest()
    return norms_folder() / "runs" / f"{digest[:32]}.json"


def note_entry(key: dict, entry: Path) -> None:
    """Note that a run of ``key`` uses the norm cache's ``entry`` (a run, after reading or
    writing it)."""
    write_text_atomically(note_path(key), json.dumps({"key": key, "entry": entry.name},
                                                     sort_keys=True, default=str))


def norm_cached(key: dict) -> bool:
    """Whether a run of ``key`` will read its norm from the cache: a note of it names an
    entry that holds a positive finite norm (an unreadable note or entry: not cached)."""
    try:
        note = json.loads(note_path(key).read_text())
        entry = json.loads((norms_folder() / str(note["entry"])).read_text())
        value = float(entry["norm_squared"])
    except (OSError, ValueError, KeyError, TypeError):
        return False
    return json.loads(json.dumps(key, default=str)) == note.get("key") and \
        math.isfinite(value) and value > 0
