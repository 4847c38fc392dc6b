#!/bin/bash
# Builds dyntrace for one interpreter and puts it where people find it:
#   dist/python<X.Y>/dyntrace.so   the extension module (`import dyntrace` with PYTHONPATH there)
#   dist/python<X.Y>/dyntrace      the command (`dyntrace script.py`), embedding that interpreter
# Usage: tools/build_module.sh [path/to/python3]
set -euo pipefail
cd "$(dirname "$0")/.."
python=${1:-/usr/bin/python3}
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
bazel build -c opt --repo_env=PYTHON_BIN_PATH="$python" //:dyntrace.so //cli:dyntrace
mkdir -p "dist/python$version"
install -m 0755 bazel-bin/dyntrace.so "dist/python$version/dyntrace.so"
install -m 0755 bazel-bin/cli/dyntrace "dist/python$version/dyntrace"
echo "built dist/python$version/dyntrace.so: PYTHONPATH=$PWD/dist/python$version $python -c 'import dyntrace'"
echo "built dist/python$version/dyntrace: dist/python$version/dyntrace script.py args..."
