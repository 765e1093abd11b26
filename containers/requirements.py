"""Print the image's requirement lines, sorted, from pyproject.toml (stdlib only).

Run inside the image build: `python requirements.py pyproject.toml EXTRA...`. The versions are
not repeated here: pip applies constraints.txt to these names, so pyproject.toml and
constraints.txt stay the only places where versions live.
"""

from __future__ import annotations

import sys
import tomllib
from pathlib import Path


def requirements(pyproject: Path, extras: list[str]) -> list[str]:
    """The project's dependencies plus those of ``extras``, sorted (a stable install order)."""
    project = tomllib.loads(pyproject.read_text())["project"]
    lines = list(project["dependencies"])
    optional = project.get("optional-dependencies", {})
    for extra in extras:
        if extra not in optional:
            raise SystemExit(f"requirements.py: no extra '{extra}' in {pyproject} "
                             f"(has: {', '.join(sorted(optional))})")
        lines.extend(optional[extra])
    return sorted(set(lines), key=str.lower)


if __name__ == "__main__":
    if len(sys.argv) < 2:
        raise SystemExit("usage: requirements.py PYPROJECT [EXTRA...]")
    print("\n".join(requirements(Path(sys.argv[1]), sys.argv[2:])))
