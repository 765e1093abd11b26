"""Small denoisers this project trains itself and ships as package data (``pretrained: bundled``).

Each shipped file ``scalebench/data/weights/<name>.pth`` (a state dict) has a recipe record
``<name>.json`` beside it: the architecture it loads into, the training recipe and seed, the
training images with their sha256, the images kept out of training, and the held-out figures
measured when it was trained. Its sha256 is also in ``scalebench/data/manifest.toml`` (kind
"bundled"), which the loader checks before use.

Training data: pictures that scikit-image ships inside its wheel (each file is checked against
the installed distribution's RECORD, so none is fetched). Kept out of training, because the
benchmarks evaluate on them: the astronaut photograph (super-resolution and the standalone
denoiser), the Shepp-Logan phantom (tomography) and the generated ellipses (synthetic).

``train(recipe)`` is the whole recipe: ``python -m tools.train_bundled_denoisers`` runs it and
writes the files; ``python -m tools.check_bundled_denoisers`` re-runs it and compares with the
shipped files.
"""

from __future__ import annotations

import json
import math
import time
from dataclasses import asdict, dataclass, field
from importlib import metadata
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from scalebench.data.fetch import BUNDLED_WEIGHTS, file_digest
from scalebench.denoisers.catalog import bundled_record
from scalebench.rank.metrics import psnr

SKIMAGE_DISTRIBUTION = "scikit-image"
# Pictures of scikit-image's wheel used for training. Grey models also train on the luminance
# of the colour pictures.
GRAY_IMAGES = ("camera.png", "brick.png", "coins.png", "grass.png", "gravel.png", "moon.png",
               "page.png", "text.png", "cell.png")
COLOUR_IMAGES = ("chelsea.png", "coffee.png", "rocket.jpg", "motorcycle_left.png",
                 "hubble_deep_field.jpg", "retina.jpg", "ihc.png")
# Never trained on: the benchmarks evaluate on them.
HELD_OUT = ("astronaut.png (super-resolution, standalone denoiser, held-out check)",
            "phantom.png (tomography's Shepp-Logan phantom)",
            "generated random ellipses (synthetic problems)")
MAX_SIDE = 512  # larger pictures are downscaled first (antialiased) to this longest side
EVAL_SIGMAS = (0.02, 0.05, 0.1)
EVAL_SIZE = 512  # the super-resolution example's size
RECORD_VERSION = 1


@dataclass(frozen=True)
class Recipe:
    """Everything that determines a bundled denoiser."""

    name: str  # "<architecture>_<gray|color>": the file stem and the manifest entry
    architecture: str  # "drunet" or "dncnn" (deepinv's classes)
    channels: int
    widths: dict = field(default_factory=dict)  # keyword arguments of the deepinv class
    steps: int = 300
    batch: int = 16
    patch: int = 32
    sigma_max: float = 0.12  # training noise levels: uniform in [0, sigma_max]
    learning_rate: float = 2e-3  # Adam: linear warm-up, then cosine decay to 1%
    warmup: int = 30  # steps of linear warm-up (the first steps of Adam are the largest)
    seed: int = 0
    threads: int = 1  # torch threads while training (one: reproducible bit for bit here)

    @property
    def images(self) -> tuple[str, ...]:
        return (*GRAY_IMAGES, *COLOUR_IMAGES) if self.channels == 1 else COLOUR_IMAGES


# A narrow DRUNet (deepinv's DRUNet class with a quarter of its widths and one residual block
# per scale instead of four: about 0.57 M parameters instead of 32.6 M) and a shallow DnCNN
# (10 layers of 32 channels instead of 20 of 64): each trains in minutes on two CPU cores.
DRUNET_WIDTHS = {"nc": [16, 32, 64, 128], "nb": 1}
DNCNN_WIDTHS = {"depth": 10, "nf": 32}
RECIPES = {r.name: r for r in (
    Recipe("drunet_gray", "drunet", 1, DRUNET_WIDTHS, seed=1),
    Recipe("drunet_color", "drunet", 3, DRUNET_WIDTHS, seed=2),
    Recipe("dncnn_gray", "dncnn", 1, DNCNN_WIDTHS, seed=3),
    Recipe("dncnn_color", "dncnn", 3, DNCNN_WIDTHS, steps=450, seed=4),
)}


def make_network(architecture: str, channels: int, widths: dict) -> nn.Module:
    """deepinv's network of ``architecture`` with the given widths, randomly initialised."""
    import deepinv as dinv

    cls = dinv.models.DRUNet if architecture == "drunet" else dinv.models.DnCNN
    return cls(in_channels=channels, out_channels=channels, pretrained=None, **widths)


@torch.no_grad()
def identity_start(model: nn.Module, architecture: str, channels: int) -> None:
    """Make a fresh network return its input exactly (training starts from the identity).

    DnCNN adds its input to its last convolution: that convolution starts at zero. DRUNet has no
    such skip: its head copies the input into its first channels, its tail reads them back,
    and the upsampling convolution of the decoder's last level starts at zero, so the U-Net
    adds nothing until it has learnt something. Either way the first steps cannot make the
    image worse, which is what lets a few hundred steps on a CPU give a useful denoiser.
    """
    if architecture == "dncnn":
        model.out_conv.weight.zero_()
        model.out_conv.bias.zero_()
        return
    model.m_up1[0].weight.zero_()
    model.m_head.weight[:channels].zero_()
    model.m_tail.weight.zero_()
    centre = model.m_head.weight.shape[-1] // 2
    for c in range(channels):
        model.m_head.weight[c, c, centre, centre] = 1.0
        model.m_tail.weight[c, c, centre, centre] = 1.0


def skimage_file(name: str) -> Path:
    """A picture shipped inside scikit-image's wheel; refused unless its RECORD lists it."""
    relative = f"skimage/data/{name}"
    files = {str(f) for f in metadata.files(SKIMAGE_DISTRIBUTION) or ()}
    if relative not in files:
        raise FileNotFoundError(f"{relative} is not a file of the installed "
                                f"{SKIMAGE_DISTRIBUTION} distribution")
    path = Path(metadata.distribution(SKIMAGE_DISTRIBUTION).locate_file(relative))
    if not path.is_file():
        raise FileNotFoundError(f"{path} is listed by {SKIMAGE_DISTRIBUTION} but missing")
    return path


def _to_tensor(array: np.ndarray, channels: int) -> torch.Tensor:
    """(1, channels, H, W) float in [0, 1] from a uint8 picture (grey from RGB: luminance)."""
    image = torch.from_numpy(np.ascontiguousarray(array)).float() / 255.0
    image = image[..., :3].permute(2, 0, 1) if image.ndim == 3 else image[None]
    if channels == 1 and image.shape[0] == 3:
        image = (torch.tensor([0.2125, 0.7154, 0.0721])[:, None, None] * image).sum(0, True)
    image = image[None]
    side = max(image.shape[-2:])
    if side > MAX_SIDE:
        size = [round(n * MAX_SIDE / side) for n in image.shape[-2:]]
        image = F.interpolate(image, size=size, mode="bilinear", antialias=True,
                              align_corners=False).clamp_(0.0, 1.0)
    return image


def training_images(recipe: Recipe) -> list[torch.Tensor]:
    from skimage import io

    return [_to_tensor(io.imread(skimage_file(name)), recipe.channels)
            for name in recipe.images]


def held_out_image(channels: int, size: int = EVAL_SIZE) -> torch.Tensor:
    """The astronaut photograph (never trained on) at ``size``², grey as its luminance."""
    from skimage import io

    image = _to_tensor(io.imread(skimage_file("astronaut.png")), channels)
    return F.interpolate(image, size=(size, size), mode="bilinear", antialias=True,
                         align_corners=False).clamp_(0.0, 1.0)


def _patches(images: list[torch.Tensor], recipe: Recipe,
             generator: torch.Generator) -> torch.Tensor:
    """A batch of random patches (picture drawn by area), randomly flipped and rotated."""
    areas = torch.tensor([float(i.shape[-1] * i.shape[-2]) for i in images])
    picks = torch.multinomial(areas, recipe.batch, replacement=True, generator=generator)
    out = []
    for index in picks.tolist():
        image = images[index]
        top = int(torch.randint(image.shape[-2] - recipe.patch + 1, (1,), generator=generator))
        left = int(torch.randint(image.shape[-1] - recipe.patch + 1, (1,), generator=generator))
        patch = image[0, :, top:top + recipe.patch, left:left + recipe.patch]
        turns, flip = torch.randint(4, (2,), generator=generator).tolist()
        patch = torch.rot90(patch, turns, (1, 2))
        out.append(patch.flip(2) if flip % 2 else patch)
    return torch.stack(out)


def _rate(recipe: Recipe, step: int) -> float:
    """Learning-rate factor at ``step``: linear warm-up, then cosine from 1 to 0.01."""
    if step < recipe.warmup:
        return (step + 1) / recipe.warmup
    progress = (step - recipe.warmup) / max(1, recipe.steps - recipe.warmup)
    return 0.01 + 0.99 * 0.5 * (1 + math.cos(math.pi * progress))


def train(recipe: Recipe, log=print) -> tuple[nn.Module, dict]:
    """Train ``recipe``'s network from its seed; return it (eval mode) and the run's facts."""
    previous_threads = torch.get_num_threads()
    torch.set_num_threads(recipe.threads)
    try:
        torch.manual_seed(recipe.seed)
        model = make_network(recipe.architecture, recipe.channels, recipe.widths)
        identity_start(model, recipe.architecture, recipe.channels)
        generator = torch.Generator().manual_seed(recipe.seed)
        images = training_images(recipe)
        optimiser = torch.optim.Adam(model.parameters(), lr=recipe.learning_rate)
        schedule = torch.optim.lr_scheduler.LambdaLR(optimiser, lambda step: _rate(recipe, step))
        start, losses = time.perf_counter(), []
        model.train()
        for step in range(recipe.steps):
            clean = _patches(images, recipe, generator)
            sigma = torch.rand(recipe.batch, generator=generator) * recipe.sigma_max
            noisy = clean + sigma[:, None, None, None] * torch.randn(clean.shape,
                                                                    generator=generator)
            loss = F.mse_loss(model(noisy, sigma), clean)
            optimiser.zero_grad()
            loss.backward()
            optimiser.step()
            schedule.step()
            losses.append(loss.item())
            if (step + 1) % 50 == 0 or step + 1 == recipe.steps:
                recent = sum(losses[-50:]) / len(losses[-50:])
                log(f"{recipe.name}: step {step + 1}/{recipe.steps}, loss {recent:.2e}, "
                    f"{time.perf_counter() - start:.0f} s")
        facts = {"training_seconds": round(time.perf_counter() - start, 1),
                 "final_loss": sum(losses[-50:]) / len(losses[-50:])}
    finally:
        torch.set_num_threads(previous_threads)
    return model.eval().requires_grad_(False), facts


@torch.no_grad()
def held_out_figures(model: nn.Module, channels: int, seed: int = 0) -> dict[str, dict]:
    """PSNR (dB) of the noisy and the denoised held-out image at each of EVAL_SIGMAS."""
    truth = held_out_image(channels)
    figures = {}
    for sigma in EVAL_SIGMAS:
        noise = torch.randn(truth.shape, generator=torch.Generator().manual_seed(seed))
        noisy = truth + sigma * noise
        figures[str(sigma)] = {"noisy_psnr_db": round(psnr(noisy, truth), 3),
                               "denoised_psnr_db": round(psnr(model(noisy, sigma), truth), 3)}
    return figures


def record(recipe: Recipe, model: nn.Module, facts: dict, weights: Path) -> dict:
    """The recipe record written beside a weights file."""
    import deepinv

    return {
        "record_version": RECORD_VERSION,
        "name": recipe.name,
        "file": weights.name,
        "sha256": file_digest(weights),
        "size": weights.stat().st_size,
        "architecture": {"class": recipe.architecture, "in_channels": recipe.channels,
                         "widths": recipe.widths,
                         "parameters": sum(p.numel() for p in model.parameters())},
        "recipe": {**asdict(recipe), "loss": "mean squared error", "optimiser": "Adam",
                   "noise": "white Gaussian, sigma uniform in [0, sigma_max] per patch",
                   "augmentation": "random crop, rotation by k x 90 degrees, flip",
                   "initialisation": "seeded random, then identity start (identity_start)"},
        "data": {"source": f"pictures shipped in the {SKIMAGE_DISTRIBUTION} "
                           f"{metadata.version(SKIMAGE_DISTRIBUTION)} wheel (listed in its "
                           f"RECORD; never fetched), longest side downscaled to {MAX_SIDE}",
                 "channels": "luminance of colour pictures" if recipe.channels == 1 else "RGB",
                 "files": {name: file_digest(skimage_file(name)) for name in recipe.images},
                 "held_out": list(HELD_OUT)},
        "held_out_check": {"image": f"astronaut.png at {EVAL_SIZE}x{EVAL_SIZE}, noise seed 0",
                           "psnr_db": held_out_figures(model, recipe.channels)},
        "software": {"torch": torch.__version__, "deepinv": deepinv.__version__},
        **facts,
        "command": "python -m tools.train_bundled_denoisers",
    }


def train_and_save(recipe: Recipe, directory: Path, log=print) -> dict:
    """Train ``recipe`` and write ``<name>.pth`` and ``<name>.json`` into ``directory``."""
    model, facts = train(recipe, log)
    directory.mkdir(parents=True, exist_ok=True)
    weights = directory / f"{recipe.name}.pth"
    torch.save({k: v.contiguous() for k, v in model.state_dict().items()}, weights)
    document = record(recipe, model, facts, weights)
    (directory / f"{recipe.name}.json").write_text(json.dumps(document, indent=2) + "\n")
    return document


def load_record(name: str, directory: Path = BUNDLED_WEIGHTS) -> dict:
    """The recipe record of a bundled file (architecture, recipe, data, held-out figures)."""
    return bundled_record(directory / f"{name}.pth")


def load_bundled(name: str, directory: Path = BUNDLED_WEIGHTS) -> nn.Module:
    """A bundled network from ``directory`` (no checksum check: see
    denoisers.catalog.resolve_weights)."""
    document = load_record(name, directory)
    arch = document["architecture"]
    model = make_network(arch["class"], arch["in_channels"], arch["widths"])
    model.load_state_dict(torch.load(directory / document["file"], map_location="cpu",
                                     weights_only=True))
    return model.eval().requires_grad_(False)
