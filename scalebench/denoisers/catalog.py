"""The denoisers scalebench knows, and the weights each one runs with: names, the input sizes
they take, their receptive radius, and what ``pretrained`` resolves to (deepinv's published
file, scalebench's bundled one, a user's file, seeded random weights). Imports no torch: the
checks of a config (scalebench.experiment.config) read it before anything runs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING

from scalebench.denoisers.kinds import bm3d, dncnn, drunet, tv, wavelet
from scalebench.denoisers.spec import DenoiserSpec, Weights
from scalebench.errors import ConfigError, MissingFileError, warn_once

if TYPE_CHECKING:
    from scalebench.data.manifest import Entry

# The registry: one spec per module of scalebench.denoisers.kinds (adding a denoiser is one
# module and one entry here).
DENOISERS: dict[str, DenoiserSpec] = {spec.name: spec for spec in (
    tv.SPEC, drunet.SPEC, dncnn.SPEC, wavelet.SPEC, bm3d.SPEC)}
# The file each denoiser a benchmark folder defines came from (``register``): only this
# module adds to the registry, and a file registered again (by the config check, then by a
# benchopt process) replaces its own entry.
_FILES: dict[str, Path] = {}

# deepinv publishes weights per architecture for grey and colour images: the manifest's
# entries "<architecture>_<gray|color>" (scalebench/data/manifest.toml).
HUB_CHANNELS = {1: "gray", 3: "color"}

# 'auto': deepinv's published file when it is in the torch hub cache, else the bundled one;
# 'bundled': the small networks scalebench trains and ships (scalebench.denoisers.bundled); 'hub':
# deepinv's published file only; 'none': seeded random weights (cost-only runs). Any other
# value is the path of a weights file.
PRETRAINED_VALUES = ("auto", "bundled", "hub", "none")


def register(spec: DenoiserSpec, path: Path) -> None:
    """Add ``spec``, defined by the benchmark file ``path``, to ``DENOISERS``; a name that
    scalebench or another file already defines is refused (ConfigError)."""
    owner = _FILES.get(spec.name)
    if spec.name in DENOISERS and owner != path.resolve():
        where = f"the file {owner}" if owner else "scalebench"
        raise ConfigError(f"denoiser file {path}: the name '{spec.name}' is already "
                          f"defined by {where}; give it another name")
    DENOISERS[spec.name] = spec
    _FILES[spec.name] = path.resolve()


def denoiser_spec(name: str) -> DenoiserSpec:
    """The registered spec of ``name``, or ConfigError naming the allowed ones."""
    if name not in DENOISERS:
        raise ConfigError(f"unknown denoiser '{name}' (allowed: {', '.join(DENOISERS)})")
    return DENOISERS[name]


def feature_channels(name: str, widths: dict | None) -> int:
    """Channels of the denoiser's full-resolution feature maps with ``widths`` (None: its
    published architecture's); 0 for a denoiser that keeps none (TV)."""
    spec = denoiser_spec(name)
    if spec.feature_channels is None:
        return 0
    return spec.feature_channels(widths if widths is not None else spec.default_widths)


def hub_weights_entry(name: str, channels: int) -> Entry:
    """The manifest entry of deepinv's published weights for ``name`` on ``channels``."""
    from scalebench.data.manifest import load_manifest

    if channels not in HUB_CHANNELS:
        raise ConfigError(f"denoiser '{name}': published weights exist for 1 or 3 channels, "
                          f"not {channels} (use pretrained 'none' or a weights file)")
    return load_manifest()[f"{name}_{HUB_CHANNELS[channels]}"]


def bundled_weights_entry(name: str, channels: int) -> Entry:
    """The manifest entry of the weights scalebench ships for ``name`` on ``channels``."""
    from scalebench.data.manifest import load_manifest

    if channels not in HUB_CHANNELS:
        raise ConfigError(f"denoiser '{name}': bundled weights exist for 1 or 3 channels, "
                          f"not {channels} (use pretrained 'none' or a weights file)")
    return load_manifest()[f"{name}_{HUB_CHANNELS[channels]}_bundled"]


def _verified(entry: Entry) -> Path:
    from scalebench.data.fetch import destination, require_file

    # Only a copy verified against the manifest (or accepted by `scalebench fetch
    # --allow-unverified`) is used.
    return require_file(entry, destination(entry))


def _bundled(name: str, channels: int) -> Weights:
    entry = bundled_weights_entry(name, channels)
    path = _verified(entry)
    return Weights("bundled", path, bundled_record(path)["architecture"]["widths"])


def resolve_weights(name: str, channels: int, pretrained: str) -> Weights:
    """The weights ``pretrained`` names (PRETRAINED_VALUES or a path) for ``name``.

    'auto' is 'hub' when deepinv's published file is in the torch hub cache, else 'bundled';
    rows record which one ran.
    """
    if not denoiser_spec(name).has_weights:
        return Weights("none")
    if pretrained == "none":
        return Weights("random")
    if pretrained == "bundled":
        return _bundled(name, channels)
    if pretrained in ("hub", "auto"):
        from scalebench.data.fetch import destination

        entry = hub_weights_entry(name, channels)
        if pretrained == "auto" and not destination(entry).is_file():
            return _bundled(name, channels)
        return Weights("hub", _verified(entry))
    path = Path(pretrained).expanduser()
    if not path.is_file():
        raise MissingFileError(
            f"denoiser '{name}': weights file not found: {path} (pretrained must be one of "
            f"{', '.join(PRETRAINED_VALUES)} or the path of an existing .pth file)"
        )
    return Weights("file", path)


def warn_random_weights(name: str) -> None:
    """One warning per process and denoiser: quality figures of random weights mean nothing."""
    warn_once(("random weights", name),
              f"denoiser '{name}' runs with random weights (pretrained: none): its quality "
              f"figures (PSNR, SSIM) are meaningless, its cost figures are not; use pretrained "
              f"auto, bundled, hub or a weights file for quality")


def bundled_record(weights: Path) -> dict:
    """The recipe record shipped beside a bundled weights file (``<name>.json``): the network's
    architecture, its recipe, data and held-out figures (scalebench.denoisers.bundled)."""
    return json.loads(weights.with_suffix(".json").read_text())
