"""The host allocator's two regimes, as the capacity model needs them: glibc's malloc keeps a
freed block of up to ``MMAP_THRESHOLD_MAX`` bytes in its heap for reuse, where repeated
allocations fragment it, and maps each larger block on its own, returned when freed. Imports
no torch: the probe decides its repetitions before anything runs."""

from __future__ import annotations

import platform

# The ceiling of glibc's dynamic mmap threshold on 64-bit. A network's feature maps cross it
# as the image grows, and below it the heap's reuse and fragmentation cost more bytes per
# pixel than mapping costs above it, so a calibration whose probes all sit below it
# overestimates large sizes (DnCNN: 1.17x at 16x the unknowns).
MMAP_THRESHOLD_MAX = 32 * 2**20
FLOAT32_BYTES = 4
# The image's arrays (float32, every channel) are mapped on their own, not kept in the heap,
# once this many times the threshold; below, the heap keeps and fragments the iterations'
# image-sized temporaries, and the peak per unknown is higher: CT with ASTRA at 3 GiB
# measured 1.980 GiB at 2545 (24.7 MiB images) and 1.775 GiB at 3489 (46 MiB), radio 2.135
# GiB at 2792 (29.7 MiB) and 1.931 GiB at 3522 (47 MiB).
IMAGE_MARGIN = 1.1


def glibc_host(device: str) -> bool:
    """Whether a run on ``device`` ('cpu' or 'cuda') allocates its arrays with glibc's malloc."""
    return device == "cpu" and platform.libc_ver()[0] == "glibc"


def image_mapped(image_values: int, device: str) -> bool:
    """Whether a run on ``device`` maps its image's arrays (``image_values`` float32 values)
    on their own, out of glibc's heap."""
    return glibc_host(device) and \
        image_values * FLOAT32_BYTES >= IMAGE_MARGIN * MMAP_THRESHOLD_MAX


def mapped_values() -> float:
    """The fewest float32 values of an image that ``image_mapped`` counts as mapped."""
    return IMAGE_MARGIN * MMAP_THRESHOLD_MAX / FLOAT32_BYTES
