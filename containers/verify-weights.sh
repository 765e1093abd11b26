#!/bin/sh
# Verify pretrained weights against their manifest and copy the verified files to DEST.
# usage: verify-weights.sh SRC DEST   (SRC holds manifest.txt and the files it lists)
# manifest.txt: one "SHA256 FILE URL" line per file; '#' starts a comment (generated from
# scalebench/data/manifest.toml by containers/generate.py). A listed file that is missing or
# has a different checksum stops the build; one whose sha256 is "unknown" passes only with the
# FILE.accepted-sha256 record that `scalebench fetch --allow-unverified` writes beside it.
# Each copied file gets that record in DEST too, so that run-time checks accept it.
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
    if [ ! -f "$src/$name" ]; then
        echo "weights: $name listed in $manifest is missing from $src; download it from $url" \
             "(or TORCH_HOME=/tmp/w scalebench fetch --weights, then copy /tmp/w/hub/checkpoints/*," \
             "with any .accepted-sha256 records, into $src)" >&2
        exit 1
    fi
    actual=$(sha256sum "$src/$name" | cut -d' ' -f1)
    if [ "$sum" = unknown ]; then
        accepted=$(cat "$src/$name.accepted-sha256" 2>/dev/null || true)
        if [ "$accepted" != "$actual" ]; then
            echo "weights: $name has no recorded sha256 in $manifest and no matching" \
                 "$name.accepted-sha256; accept it explicitly with" \
                 "\`scalebench fetch --weights --allow-unverified\`" >&2
            exit 1
        fi
        sum=$actual
    fi
    if [ "$actual" != "$sum" ]; then
        echo "weights: $name has sha256 $actual but $manifest records $sum" >&2
        exit 1
    fi
    cp "$src/$name" "$dest/$name"
    echo "$actual" > "$dest/$name.accepted-sha256"
    count=$((count + 1))
done 3< "$manifest"
echo "weights: $count file(s) verified into $dest"
