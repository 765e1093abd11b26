"""How a run's process starts: the libraries every run imports, loaded with the cyclic garbage
collector paused, collected once, then frozen out of every later collection.

The stack a run imports (torch, deepinv with torchvision, benchopt with pandas and matplotlib)
creates millions of objects that live as long as the process. With the collector on, the
imports trigger full collections that walk them again and again, and so do the run's own full
collections and the interpreter's exit: about a third of the CPU time of a rank process that
runs a small experiment (``tools/startup_cost.py`` measures it). One collection after the
imports frees the cyclic garbage they leave, so the process's memory baseline stays what it
was; ``gc.freeze`` then moves the survivors to the permanent generation, which no collection
walks. Objects the run creates are collected as usual.

Standard library only: the modules are named, not imported here.
"""

from __future__ import annotations

import gc
import importlib
from collections.abc import Iterable

# The libraries a run of either benchmark imports, whatever its dataset and solver: a run's
# process (``python -m scalebench.benchopt_glue``) and a memory probe load them first.
RUN_LIBRARIES = ("torch", "deepinv", "benchopt.cli")


def import_and_freeze(modules: Iterable[str] = RUN_LIBRARIES) -> None:
    """Import ``modules`` (dotted names) with the collector paused, collect once, and freeze
    what survives."""
    gc.disable()
    try:
        for name in modules:
            importlib.import_module(name)
        gc.collect()
    finally:
        gc.enable()
    gc.freeze()
