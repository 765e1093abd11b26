"""Where scalebench keeps files it can rebuild or re-fetch: fetched data and weights, prepared
arrays, computed operator norms.

One root for all of them, so that a login node can fill it once and offline compute nodes (or
a container bind mount) can share it: ``$SCALEBENCH_CACHE``, else ``$XDG_CACHE_HOME/scalebench``,
else ``~/.cache/scalebench``.
"""

from __future__ import annotations

import os
from pathlib import Path


def cache_root() -> Path:
    """The cache folder (not created here)."""
    configured = os.environ.get("SCALEBENCH_CACHE")
    if configured:
        return Path(configured).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "scalebench"


def offline() -> bool:
    """True when nothing may be downloaded (SCALEBENCH_OFFLINE=1, set in the container images)."""
    return os.environ.get("SCALEBENCH_OFFLINE", "0") not in ("", "0", "false", "no")
