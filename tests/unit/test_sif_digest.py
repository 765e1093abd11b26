"""provenance.sif: what makes two SIF files the same image. SIF files are written here in the
real layout (header, descriptor table, partitions); tests/system/test_apptainer.py checks real
builds."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import pytest

from provenance.sif import DESCRIPTOR_SIZE, SifError, sif_digest

DESCRIPTORS_AT = 4096  # where Apptainer 1.4 puts the descriptor table


def write_sif(path: Path, partitions: list[tuple[int, bytes, str]], sif_id: bytes,
              stamp: int) -> Path:
    """A SIF with ``partitions`` (data type, bytes, name), build ID and times ``stamp``."""
    table = bytearray(DESCRIPTOR_SIZE * (len(partitions) + 2))  # two unused descriptors
    data_at = DESCRIPTORS_AT + len(table)
    data = bytearray()
    for number, (kind, content, name) in enumerate(partitions):
        offset = data_at + len(data)
        struct.pack_into("<i?IIIqqqqqqq", table, number * DESCRIPTOR_SIZE, kind, True,
                         number + 1, 1 | 0xf0000000, 0, offset, len(content), len(content),
                         stamp, stamp, 0, 0)
        table[number * DESCRIPTOR_SIZE + 73:number * DESCRIPTOR_SIZE + 73 + len(name)] = \
            name.encode()
        data += content
    header = bytearray(128)
    header[0:31] = b"#!/usr/bin/env run-singularity\n"
    header[32:42] = b"SIF_MAGIC\0"
    header[42:45] = b"01\0"
    header[45:48] = b"02\0"
    header[48:64] = sif_id
    struct.pack_into("<qqqqqqqq", header, 64, stamp, stamp, 2, len(partitions) + 2,
                     DESCRIPTORS_AT, len(table), data_at, len(data))
    path.write_bytes(bytes(header) + bytes(DESCRIPTORS_AT - 128) + bytes(table) + bytes(data))
    return path


PARTITIONS = [(0x4001, b"Bootstrap: docker\n", ""), (0x4005, b'{"a": "b"}', ""),
              (0x4004, b"hsqs" + bytes(range(256)) * 8, "")]


def test_build_stamps_do_not_change_the_digest(tmp_path):
    first = write_sif(tmp_path / "a.sif", PARTITIONS, b"\x01" * 16, 1_700_000_000)
    second = write_sif(tmp_path / "b.sif", PARTITIONS, b"\x02" * 16, 1_800_000_000)
    assert hashlib.sha256(first.read_bytes()).digest() != \
        hashlib.sha256(second.read_bytes()).digest()
    assert sif_digest(first) == sif_digest(second)
    assert sif_digest(first).startswith("sha256:") and len(sif_digest(first)) == 71


def test_a_stamp_free_sif_digest_is_its_file_sha256(tmp_path):
    """What Apptainer releases with reproducible builds write: no ID, zero times."""
    sif = write_sif(tmp_path / "a.sif", PARTITIONS, bytes(16), 0)
    assert sif_digest(sif) == "sha256:" + hashlib.sha256(sif.read_bytes()).hexdigest()


@pytest.mark.parametrize("change", ["root file system", "labels", "definition", "name"])
def test_any_content_change_makes_another_image(tmp_path, change):
    changed = [list(p) for p in PARTITIONS]
    if change == "root file system":
        changed[2][1] = changed[2][1][:-1] + b"\x00"
    elif change == "labels":
        changed[1][1] = b'{"a": "c"}'
    elif change == "definition":
        changed[0][1] = b"Bootstrap: docker \n"
    else:
        changed[2][2] = "rootfs"
    same = write_sif(tmp_path / "a.sif", PARTITIONS, b"\x01" * 16, 5)
    other = write_sif(tmp_path / "b.sif", [tuple(p) for p in changed], b"\x01" * 16, 5)
    assert sif_digest(same) != sif_digest(other)


def test_truncated_and_foreign_files_are_refused_in_one_line(tmp_path):
    sif = write_sif(tmp_path / "a.sif", PARTITIONS, b"\x01" * 16, 5)
    cut = tmp_path / "cut.sif"
    cut.write_bytes(sif.read_bytes()[:-10])
    short = tmp_path / "short.sif"
    short.write_bytes(sif.read_bytes()[:DESCRIPTORS_AT + 10])
    foreign = tmp_path / "foreign.sif"
    foreign.write_bytes(b"PK\x03\x04 a zip file, not a SIF")
    for path, message in ((cut, "truncated SIF"), (short, "corrupt SIF"),
                          (foreign, "not a SIF file"), (tmp_path / "absent.sif", "cannot read")):
        with pytest.raises(SifError) as error:
            sif_digest(path)
        assert message in str(error.value) and "\n" not in str(error.value)
