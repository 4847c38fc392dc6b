#!/bin/bash
# Quickstart step 1: install what is missing, build dyntrace for Debian's python3, and run an
# example end to end: an MLP inference loop under the dyntrace command, with its statistics.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
tools/build_module.sh /usr/bin/python3
version=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
"dist/python$version/dyntrace" --stats examples/mlp_inference.py
