"""Tests that must run in CI: where this machine cannot run them, they skip elsewhere and
fail in CI (the variable CI set, as CI services and .ci/run set it)."""

from __future__ import annotations

import os

import pytest


def in_ci() -> bool:
    """Whether the variable CI is set (to anything but empty, 0 or false)."""
    return os.environ.get("CI", "").lower() not in ("", "0", "false")


def skip_unless_ci(reason: str) -> None:
    """Skip the calling test for ``reason``; in CI, where it must run, fail it for that
    reason."""
    if in_ci():
        pytest.fail(f"cannot run in CI: {reason}", pytrace=False)
    pytest.skip(reason)
