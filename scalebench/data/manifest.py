"""The manifest of downloadable files (``manifest.toml`` beside this module)."""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path

from scalebench.errors import ConfigError

MANIFEST = Path(__file__).resolve().parent / "manifest.toml"
# "bundled": weights shipped inside the package (scalebench/data/weights/), never downloaded.
KINDS = ("weights", "data", "bundled")
ALGORITHMS = ("sha256", "md5")
UNKNOWN = "unknown"


@dataclass(frozen=True)
class Entry:
    """One downloadable file; ``size`` and ``checksum`` are None when unknown."""

    name: str
    kind: str  # "weights", "data" or "bundled"
    file: str
    url: str  # empty for "bundled" files
    size: int | None
    algorithm: str | None  # "sha256" or "md5"
    checksum: str | None  # lower-case hex digest as published
    checksum_source: str
    licence: str

    @property
    def verifiable(self) -> bool:
        return self.checksum is not None

    def fetch_command(self) -> str:
        """The command that downloads this file (or restores a bundled one)."""
        if self.kind == "bundled":
            return "pip install --force-reinstall scalebench"
        return ("scalebench fetch --weights" if self.kind == "weights"
                else f"scalebench fetch --data {self.name}")


def _entry(name: str, table: dict, source: Path) -> Entry:
    where = f"{source}: [{name}]"
    required = ["kind", "file", "size", "checksum", "licence"]
    if table.get("kind") != "bundled":
        required.append("url")
    missing = [key for key in required if key not in table]
    if missing:
        raise ConfigError(f"{where} lacks {', '.join(missing)}")
    if table["kind"] not in KINDS:
        raise ConfigError(f"{where}: kind must be one of {', '.join(KINDS)}, "
                          f"got {table['kind']!r}")
    size = table["size"]
    if size != UNKNOWN and not (isinstance(size, int) and size > 0):
        raise ConfigError(f"{where}: size must be a positive integer or 'unknown', got {size!r}")
    algorithm = checksum = None
    if table["checksum"] != UNKNOWN:
        algorithm, _, checksum = str(table["checksum"]).partition(":")
        if algorithm not in ALGORITHMS or not checksum or any(
                c not in "0123456789abcdef" for c in checksum.lower()):
            raise ConfigError(f"{where}: checksum must be 'sha256:HEX', 'md5:HEX' or 'unknown', "
                              f"got {table['checksum']!r}")
    return Entry(name, table["kind"], table["file"], table.get("url", ""),
                 None if size == UNKNOWN else size, algorithm,
                 checksum.lower() if checksum else None,
                 table.get("checksum_source", ""), table["licence"])


def load_manifest(path: Path | None = None) -> dict[str, Entry]:
    """Every entry of the manifest at ``path`` (default: the packaged one), by name."""
    path = Path(path) if path is not None else MANIFEST
    try:
        tables = tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as error:
        raise ConfigError(f"cannot read manifest {path}: {error}") from None
    return {name: _entry(name, table, path) for name, table in tables.items()}
