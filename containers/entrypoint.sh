#!/bin/sh
# Entry point of the scalebench image (Docker ENTRYPOINT, Apptainer %runscript): run the given
# command in the image's environment, or describe the image when there is none.
set -eu
if [ "$#" -eq 0 ]; then
    exec /opt/scalebench/venv/bin/python /opt/scalebench/src/containers/image_info.py
fi
exec "$@"
