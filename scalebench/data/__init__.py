"""Downloadable files (pretrained weights, data sets): their manifest, fetching and checks.

``manifest.toml`` lists every file with its URL, size, published checksum and licence;
``scalebench fetch`` downloads and verifies into the caches; run-time code only ever reads
verified files from those caches and names the fetch command when one is missing or corrupt.
This package imports no torch.
"""
