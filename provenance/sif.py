"""The identity of an Apptainer image (SIF file) that a rebuild can reproduce.

Two builds of one definition from the same inputs differ only in what the builder stamps at
build time: the SIF header's random ID, the header's and every descriptor's creation and
modification times. (The build-date label is fixed by the definition, and squashfs takes its
times from SOURCE_DATE_EPOCH.) The image digest is therefore the sha256 of the file with
those fields set to zero: every partition (definition, labels, environment, root file
system), every descriptor's type, size, offset and name and the rest of the header count.
Apptainer releases with reproducible builds write exactly those fields as zero, so for their
SIFs this is the plain file sha256.

SIF layout (sif v2, little-endian): a 128-byte header (launch line, magic "SIF_MAGIC",
version, architecture, 16-byte ID at 48, created and modified times at 64 and 72, descriptor
counts, descriptor offset and size at 96 and 104, data offset and size), then, at that
offset, fixed-size 585-byte descriptors (used flag at 4, partition offset and size at 17 and
25, created and modified times at 41 and 49), then the partitions.

Standard library only: replay, verify-image and provenance all call ``sif_digest``.
"""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

MAGIC = b"SIF_MAGIC\0"
HEADER_SIZE = 128
DESCRIPTOR_SIZE = 585
BUILD_STAMPS_IN_HEADER = ((48, 16), (64, 8), (72, 8))  # ID, created, modified
BUILD_STAMPS_IN_DESCRIPTOR = ((41, 8), (49, 8))  # created, modified
BLOCK = 1 << 22


class SifError(ValueError):
    """The file is not a readable SIF; the message says what is wrong in one line."""


def _blank(buffer: bytearray, start: int, fields: tuple[tuple[int, int], ...]) -> None:
    for offset, length in fields:
        buffer[start + offset:start + offset + length] = bytes(length)


def normalized_head(path: Path) -> tuple[bytes, int]:
    """(the file up to the end of its descriptor table, build stamps zeroed; where the rest
    starts). Raises SifError for a file that is not a complete SIF."""
    try:
        size = path.stat().st_size
        with path.open("rb") as stream:
            header = stream.read(HEADER_SIZE)
            if len(header) < HEADER_SIZE or header[32:42] != MAGIC:
                raise SifError(f"{path} is not a SIF file (no SIF header)")
            total, offset, length = struct.unpack_from("<qqq", header, 88)
            if (total <= 0 or length != total * DESCRIPTOR_SIZE or offset < HEADER_SIZE
                    or offset + length > size):
                raise SifError(f"{path} is a corrupt SIF file (descriptor table outside the "
                               f"file or of the wrong size)")
            stream.seek(0)
            head = bytearray(stream.read(offset + length))
    except OSError as error:
        raise SifError(f"cannot read SIF file {path}: {error.strerror}") from error
    _blank(head, 0, BUILD_STAMPS_IN_HEADER)
    for start in range(offset, offset + length, DESCRIPTOR_SIZE):
        if head[start + 4]:  # a used descriptor
            data_offset, data_size = struct.unpack_from("<qq", head, start + 17)
            if data_offset < 0 or data_size < 0 or data_offset + data_size > size:
                raise SifError(f"{path} is a corrupt or truncated SIF file (a partition "
                               f"ends after the end of the file)")
            _blank(head, start, BUILD_STAMPS_IN_DESCRIPTOR)
    return bytes(head), offset + length


def sif_digest(path: str | Path) -> str:
    """'sha256:HEX' of the SIF with its build stamps (ID, times) zeroed."""
    path = Path(path)
    head, rest = normalized_head(path)
    digest = hashlib.sha256(head)
    with path.open("rb") as stream:
        stream.seek(rest)
        for block in iter(lambda: stream.read(BLOCK), b""):
            digest.update(block)
    return "sha256:" + digest.hexdigest()


def is_sif(path: str | Path) -> bool:
    """Whether the file starts with a SIF header (a cheap test, not a validation)."""
    try:
        with Path(path).open("rb") as stream:
            return stream.read(42)[32:42] == MAGIC
    except OSError:
        return False
