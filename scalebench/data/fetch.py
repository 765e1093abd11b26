"""Download and verify the manifest's files; check cached files before they are used.

Weights go to the torch hub cache the denoisers read (``$TORCH_HOME/hub/checkpoints``, as
``torch.hub.get_dir()`` resolves it), data under the scalebench cache (``<cache>/data/<name>/``).
A download streams into a temporary file beside its destination while hashing, is checked
(HTTP status, announced length, published size and checksum) and only then renamed onto the
final name, so a truncated or corrupt download never sits under that name. With
SCALEBENCH_OFFLINE=1 nothing is downloaded.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import sys
import urllib.error
import urllib.request
from pathlib import Path

from provenance.files import atomic_path, write_text_atomically
from scalebench.data.cache import cache_root, offline
from scalebench.data.manifest import Entry
from scalebench.errors import CommandFailed, ConfigError, MissingFileError

CHUNK = 1 << 20
ACCEPTED_SUFFIX = ".accepted-sha256"  # sidecar: sha256 of a file accepted without a checksum
TIMEOUT_S = 60


class FetchError(CommandFailed):
    """A download failed or gave a file that does not match the manifest."""


def hub_checkpoints() -> Path:
    """``torch.hub.get_dir()/checkpoints``, resolved by torch's rule without importing torch."""
    torch_home = os.environ.get("TORCH_HOME") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or "~/.cache", "torch")
    return Path(torch_home).expanduser() / "hub" / "checkpoints"


# The weights scalebench trains and ships (scalebench.denoisers.bundled), inside the package.
BUNDLED_WEIGHTS = Path(__file__).resolve().parent / "weights"


def destination(entry: Entry, cache: Path | None = None) -> Path:
    """Where ``entry`` is kept: the torch hub cache for weights, the scalebench cache for data,
    the package's own folder for bundled weights."""
    if entry.kind == "bundled":
        return BUNDLED_WEIGHTS / entry.file
    if entry.kind == "weights":
        return hub_checkpoints() / entry.file
    return (cache if cache is not None else cache_root()) / "data" / entry.name / entry.file


def file_digest(path: Path, algorithm: str = "sha256") -> str:
    digest = hashlib.new(algorithm)
    with open(path, "rb") as stream:
        while block := stream.read(CHUNK):
            digest.update(block)
    return digest.hexdigest()


def _accepted(path: Path) -> Path:
    return path.with_name(path.name + ACCEPTED_SUFFIX)


def problem_with(entry: Entry, path: Path) -> str | None:
    """Why the file at ``path`` must not be used as ``entry`` (None when it is verified)."""
    if not path.is_file():
        return "missing"
    size = path.stat().st_size
    if entry.size is not None and size != entry.size:
        return f"{size} bytes, the manifest says {entry.size}"
    if entry.verifiable:
        actual = file_digest(path, entry.algorithm)
        if actual != entry.checksum:
            return f"{entry.algorithm} {actual}, the manifest says {entry.checksum}"
        return None
    record = _accepted(path)
    if not record.is_file():
        return ("no published checksum, and it was not accepted with "
                "`scalebench fetch --allow-unverified`")
    if file_digest(path) != record.read_text().strip():
        return f"its sha256 differs from the one accepted in {record.name}"
    return None


def require_file(entry: Entry, path: Path) -> Path:
    """``path`` when it holds a verified copy of ``entry``; else a one-line error."""
    problem = problem_with(entry, path)
    if problem == "missing":
        raise MissingFileError(f"{entry.file} not found at {path}: run `{entry.fetch_command()}` "
                               f"(on a machine with network access, then copy the cache)")
    if problem is not None:
        raise MissingFileError(f"{path} is not a verified copy of {entry.file} ({problem}): "
                               f"run `{entry.fetch_command()}`")
    return path


def accept_file(path: Path) -> str:
    """Record the sha256 of ``path`` as accepted (for files the manifest has no checksum for)."""
    sha256 = file_digest(path)
    write_text_atomically(_accepted(path), sha256 + "\n")
    return sha256


def _download(entry: Entry, partial: Path) -> str:
    """Stream ``entry.url`` into ``partial``; return its sha256; raise FetchError on failure."""
    request = urllib.request.Request(entry.url, headers={"User-Agent": "scalebench-fetch"})
    sha256 = hashlib.sha256()
    published = hashlib.new(entry.algorithm) if entry.verifiable else None
    received = 0
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as response, \
                open(partial, "wb") as stream:
            announced = response.headers.get("Content-Length")
            while block := response.read(CHUNK):
                stream.write(block)
                sha256.update(block)
                if published is not None:
                    published.update(block)
                received += len(block)
    except urllib.error.HTTPError as error:
        raise FetchError(f"{entry.name}: HTTP {error.code} ({error.reason}) for {entry.url}") \
            from None
    except urllib.error.URLError as error:  # before any answer: no connection was made
        raise FetchError(f"{entry.name}: cannot connect to {entry.url} "
                         f"({_reason(error.reason)}); check the network or the manifest's "
                         f"address") from None
    except (OSError, http.client.HTTPException) as error:
        raise FetchError(f"{entry.name}: download from {entry.url} broke off after {received} "
                         f"bytes ({type(error).__name__}: {error})") from None
    if announced is not None and int(announced) != received:
        raise FetchError(f"{entry.name}: received {received} of the {announced} bytes the "
                         f"server announced for {entry.url}")
    if entry.size is not None and received != entry.size:
        raise FetchError(f"{entry.name}: {entry.url} gave {received} bytes, the manifest says "
                         f"{entry.size}")
    if published is not None and published.hexdigest() != entry.checksum:
        raise FetchError(f"{entry.name}: {entry.url} has {entry.algorithm} "
                         f"{published.hexdigest()}, the manifest says {entry.checksum}")
    return sha256.hexdigest()


def _reason(reason: object) -> str:
    """Why a connection failed, in words (``connection refused``, a DNS error, ...)."""
    if isinstance(reason, ConnectionRefusedError):
        return "connection refused"
    if isinstance(reason, OSError) and reason.strerror:
        return reason.strerror
    return str(reason)


def fetch(entry: Entry, path: Path, allow_unverified: bool = False) -> bool:
    """Make ``path`` a verified copy of ``entry``; return True when it was downloaded.

    A verified file already there is kept. Without a published checksum the download is
    refused unless ``allow_unverified`` (then its sha256 is recorded as the accepted one).
    """
    if problem_with(entry, path) is None:
        return False
    if offline():
        raise FetchError(f"SCALEBENCH_OFFLINE is set: not downloading {entry.file} to {path}; "
                         f"run `{entry.fetch_command()}` on a machine with network access")
    if not entry.verifiable and not allow_unverified:
        raise FetchError(f"{entry.name}: {entry.file} has no published checksum in the manifest "
                         f"({entry.checksum_source}); pass --allow-unverified to download it "
                         f"and accept its sha256 as it arrives")
    path.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(path) as partial:
        sha256 = _download(entry, partial)
    if not entry.verifiable:
        write_text_atomically(_accepted(path), sha256 + "\n")  # the sha256 computed while streaming
        print(f"{entry.name}: accepted without a published checksum: sha256 {sha256}",
              file=sys.stderr)
    return True


def fetch_data(name: str, cache: Path | None = None, allow_unverified: bool = False,
               manifest: Path | None = None) -> str:
    """Download, verify and unpack data set ``name`` into the cache; a one-line report."""
    from scalebench.data import walnut
    from scalebench.data.manifest import load_manifest

    entries = {n: e for n, e in load_manifest(manifest).items() if e.kind == "data"}
    if name not in entries:  # bad input (exit 2), not a failed download
        raise ConfigError(f"unknown data set '{name}' (allowed: {', '.join(sorted(entries))})")
    cache = cache if cache is not None else cache_root()
    if walnut.is_unpacked(cache):
        return f"{name}: already in {walnut.walnut_folder(cache)}"
    entry = entries[name]
    archive = destination(entry, cache)
    fetch(entry, archive, allow_unverified)
    folder = walnut.unpack(archive, cache)
    # The unpacked files are what later runs read; the archive would double the disk use.
    archive.unlink()
    _accepted(archive).unlink(missing_ok=True)
    return f"{name}: verified and unpacked into {folder}"


def fetch_weights(allow_unverified: bool = False, manifest: Path | None = None) -> list[str]:
    """Download and verify every weights file; one line per file (errors raised last)."""
    from scalebench.data.manifest import load_manifest

    entries = [e for e in load_manifest(manifest).values() if e.kind == "weights"]
    absent = [e.file for e in entries if problem_with(e, destination(e)) is not None]
    if offline() and absent:
        raise FetchError(f"SCALEBENCH_OFFLINE is set: not downloading {', '.join(absent)} "
                         f"(missing or unverified in {hub_checkpoints()}); run `scalebench "
                         f"fetch --weights` on a machine with network access")
    lines, errors = [], []
    for entry in entries:
        path = destination(entry)
        try:
            downloaded = fetch(entry, path, allow_unverified)
        except FetchError as error:
            errors.append(str(error))
            continue
        lines.append(f"{entry.name}: {'downloaded and verified' if downloaded else 'verified'}"
                     f" {path}")
    if errors:
        raise FetchError("; ".join(errors) if len(errors) > 1 else errors[0])
    return lines
