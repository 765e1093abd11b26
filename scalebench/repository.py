"""Where the repository is: its benchmark folders, configs and templates lie under ``REPO``.
Standard library only: the launcher finds them before any stack loads."""

from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
