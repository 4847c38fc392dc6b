#!/bin/bash
# Quickstart step 1: install what is missing, build dyntrace for Debian's python3, and run an
# example end to end.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
tools/build_module.sh /usr/bin/python3
version=$(/usr/bin/python3 -c 'import sys; print("%d.%d" % sys.version_info[:2])')
PYTHONPATH="$PWD/dist/python$version" /usr/bin/python3 examples/quickstart.py
