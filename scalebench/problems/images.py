"""Image families: the ground truths a problem can be set up with, by name, and the disjoint
validation and test splits of each family (methods are tuned on the first and scored on the
second; docs/datasets-and-solvers.md lists them).

A name is either a fixed image (``shepp_logan``, ``astronaut``, ``coffee``) or a seeded one,
``<prefix>-<n>`` with n >= 0 (``phantom-3``, ``synthetic-2``, ``sky-7``), drawn from seed n at
any size. A family belongs to its problem's spec (``ProblemSpec.images``) and names the
dataset parameter a name sets: ``image`` (2D CT, super-resolution) or ``seed`` for radio's
skies, whose seed draws the sky and the noise together. Imports no torch: the checks of a
config read it (the drawing functions import theirs when they draw).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal

if TYPE_CHECKING:
    import torch

# The parameter that names an image (added with the families: runs that leave it at its
# default record no image, as runs did before it; ProblemSpec.recorded).
IMAGE_PARAMETER = "image"
Split = Literal["validation", "test"]
# The colour photographs scikit-image's wheel holds (loaded without a download), by the name
# of their loader in skimage.data (scalebench.problems.phantoms.photograph).
PHOTOGRAPHS = ("astronaut", "chelsea", "coffee", "rocket", "immunohistochemistry",
               "hubble_deep_field", "retina")
SPLITS: tuple[Split, ...] = ("validation", "test")


@dataclass(frozen=True)
class ImageFamily:
    """The images of one problem, how a name draws one, and the family's splits."""

    # The dataset parameter a name sets: "image" (its value is the name) or "seed" (the
    # name's n is the value).
    parameter: str
    # The image of the parameter's default: a run that names no image draws it.
    default: str
    # Images known by a fixed name.
    named: tuple[str, ...]
    # Prefix of the seeded names: "<prefix>-<n>", n >= 0.
    seeded: str
    validation: tuple[str, ...]
    test: tuple[str, ...]
    # Channels of every image of the family.
    channels: int
    # (checked name, side) -> (1, channels, side, side) ground truth.
    draw: Callable[[str, int], torch.Tensor]
    # What the images are, for the docs.
    description: str = ""
    # A parameter that, when not None, replaces the family's image (radio's ``sky_fits``).
    replaced_by: str | None = None

    def __post_init__(self) -> None:
        shared = sorted(set(self.validation) & set(self.test))
        if shared:
            raise ValueError(f"images {', '.join(shared)} are in both splits")
        for name in (self.default, *self.validation, *self.test):
            self.check(name)

    def forms(self) -> str:
        """The names this family allows, in words."""
        return ", ".join((*self.named, f"{self.seeded}-<n> for n >= 0"))

    def seed(self, name: str) -> int | None:
        """n of a seeded name ``<prefix>-<n>``; None for any other name."""
        match = re.fullmatch(rf"{re.escape(self.seeded)}-(0|[1-9][0-9]*)", name)
        return int(match.group(1)) if match else None

    def check(self, name: str) -> str:
        """``name`` when the family holds it, else ValueError naming the allowed forms."""
        if name in self.named or self.seed(name) is not None:
            return name
        raise ValueError(f"unknown image {name!r} (allowed: {self.forms()})")

    def image(self, name: str, size: int) -> torch.Tensor:
        """The (1, channels, size, size) ground truth called ``name``."""
        return self.draw(self.check(name), size)

    def split_of(self, name: str) -> Split | None:
        """The split that holds ``name``; None for an image of the family in neither."""
        self.check(name)
        return next((split for split in SPLITS if name in self.split(split)), None)

    def split(self, split: str) -> tuple[str, ...]:
        """The names of ``split`` ('validation' or 'test')."""
        if split not in SPLITS:
            raise ValueError(f"unknown split {split!r} (allowed: {', '.join(SPLITS)})")
        return self.validation if split == "validation" else self.test

    def parameters(self, name: str) -> dict[str, str | int]:
        """The dataset parameters that set the image ``name``."""
        self.check(name)
        return {self.parameter: self.seed(name) if self.parameter == "seed" else name}

    def name_of(self, values: dict) -> str | None:
        """The image that resolved dataset parameters ``values`` set up; None when they
        replace the family's image (``replaced_by``: a sky read from a FITS file)."""
        if self.replaced_by is not None and values.get(self.replaced_by) is not None:
            return None
        value = values[self.parameter]
        return f"{self.seeded}-{value}" if self.parameter == "seed" else str(value)
