#!/bin/sh
# Verify pretrained weights against their manifest and copy the verified files to DEST.
# usage: verify-weights.sh SRC DEST   (SRC holds manifest.txt and the files it lists)
# manifest.txt: one "SHA256 FILE URL" line per file; '#' starts a comment. A listed file that
# is missing, has no recorded checksum ("unknown") or a different checksum stops the build.
set -eu
src=$1
dest=$2
manifest=$src/manifest.txt
[ -f "$manifest" ] || { echo "weights: no manifest.txt in $src" >&2; exit 1; }
mkdir -p "$dest"
count=0
# The manifest is read on descriptor 3 so that nothing in the loop can consume it.
while read -r sum name url <&3; do
    case "$sum" in ''|'#'*) continue ;; esac
    if [ "$sum" = unknown ]; then
        echo "weights: $name has no recorded sha256 in $manifest; download it from $url," \
             "check it, and record its sha256sum there" >&2
        exit 1
    fi
    if [ ! -f "$src/$name" ]; then
        echo "weights: $name listed in $manifest is missing from $src; download it from $url" >&2
        exit 1
    fi
    actual=$(sha256sum "$src/$name" | cut -d' ' -f1)
    if [ "$actual" != "$sum" ]; then
        echo "weights: $name has sha256 $actual but $manifest records $sum" >&2
        exit 1
    fi
    cp "$src/$name" "$dest/$name"
    count=$((count + 1))
done 3< "$manifest"
echo "weights: $count file(s) verified into $dest"
