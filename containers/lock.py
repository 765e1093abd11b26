"""Rewrite constraints.txt from an installed environment, keeping the pins it does not hold.

`make lock` runs this after a deliberate upgrade in .venv. `pip freeze` alone would drop every
pin of a package that this environment lacks: extras .venv does not install (cufinufft of
`radio-cuda`, the ITK-RTK set of `rtk`), and whatever another interpreter or platform needs.
Installed packages take their installed version (setuptools and wheel included, which `pip
freeze` hides by default); every other pin of the previous lock is kept as it was, environment
marker included. One pin per package: two pins of one package (per-marker versions) are
refused rather than merged. A pin is removed only by editing constraints.txt. The file is
replaced atomically.

    python containers/lock.py [--python PYTHON] [LOCK]     # LOCK defaults to constraints.txt
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

from provenance.files import atomic_path

HEADER = ("# Every version of the environment, as installed and tested together (pip freeze).\n"
          "# Used as pip constraints by the Makefile; regenerate with: make lock\n")
PIN = re.compile(r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^;\s]+)\s*(?P<marker>;.*)?$")
NOT_PINNED = {"pip"}  # the installer itself; the Makefile upgrades it separately


class LockError(ValueError):
    """A line that cannot be part of a lock; constraints.txt is left as it was."""


def canonical(name: str) -> str:
    """PEP 503 normalised name: 'Typing_Extensions' and 'typing-extensions' are one package."""
    return re.sub(r"[-_.]+", "-", name).lower()


def parse(lines: list[str], source: str) -> dict[str, re.Match]:
    """canonical name -> pin, from 'name==version[; marker]' lines (comments ignored)."""
    pins = {}
    for line in lines:
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        match = PIN.match(line)
        if match is None:
            raise LockError(f"{source}: {line!r} is not 'NAME==VERSION[; MARKER]' (direct "
                            f"references and ranges cannot be locked)")
        name = canonical(match["name"])
        if name in pins:
            raise LockError(f"{source}: {match['name']} is pinned twice ({pins[name].group(0)!r}"
                            f" and {line!r}); keep one pin per package")
        pins[name] = match
    return pins


def installed(python: str) -> dict[str, re.Match]:
    """The environment of ``python``, as pip freeze reports it (every package, no editables)."""
    try:
        frozen = subprocess.run([python, "-m", "pip", "freeze", "--all", "--exclude-editable"],
                                capture_output=True, text=True, check=True).stdout.splitlines()
    except OSError as error:
        raise LockError(f"cannot run {python}: {error.strerror or error}") from None
    except subprocess.CalledProcessError as error:
        last = (error.stderr.strip().splitlines() or ["no output"])[-1]
        raise LockError(f"pip freeze with {python} failed ({last})") from None
    pins = parse(frozen, f"pip freeze of {python}")
    return {name: pin for name, pin in pins.items() if name not in NOT_PINNED}


def merged(previous: dict[str, re.Match], current: dict[str, re.Match]) -> list[str]:
    """Installed versions, plus the previous pins of everything not installed, sorted."""
    lines = {}
    for name, pin in previous.items():
        if name in current:
            fresh = current[name]
            lines[name] = f"{fresh['name']}=={fresh['version']}" + (
                f" {pin['marker']}" if pin["marker"] else "")
        else:
            lines[name] = pin.group(0)
    for name, pin in current.items():
        lines.setdefault(name, f"{pin['name']}=={pin['version']}")
    return [lines[name] for name in sorted(lines)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("lock", nargs="?", type=Path, default=Path("constraints.txt"))
    parser.add_argument("--python", default=sys.executable,
                        help="interpreter of the environment to freeze (default: this one)")
    args = parser.parse_args(argv)
    try:
        previous = parse(args.lock.read_text().splitlines(), str(args.lock)) \
            if args.lock.is_file() else {}
        current = installed(args.python)
    except LockError as error:
        print(f"lock.py: error: {error}", file=sys.stderr)
        return 2
    with atomic_path(args.lock) as temporary:
        temporary.write_text(HEADER + "\n".join(merged(previous, current)) + "\n")
    kept = sorted(previous[name]["name"] for name in previous.keys() - current.keys())
    changed = sorted(current[name]["name"] for name in previous.keys() & current.keys()
                     if previous[name]["version"] != current[name]["version"])
    added = sorted(current[name]["name"] for name in current.keys() - previous.keys())
    print(f"{args.lock}: {len(current)} installed pins, {len(changed)} changed"
          f"{' (' + ', '.join(changed) + ')' if changed else ''}, {len(added)} added"
          f"{' (' + ', '.join(added) + ')' if added else ''}; kept {len(kept)} pins of "
          f"packages not installed here{': ' + ', '.join(kept) if kept else ''}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
