#!/bin/bash
# Builds the dyntrace extension module for one interpreter and puts it where `import dyntrace`
# finds it: dist/python<X.Y>/dyntrace.so. Usage: tools/build_module.sh [path/to/python3]
set -euo pipefail
cd "$(dirname "$0")/.."
python=${1:-/usr/bin/python3}
version=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
bazel build -c opt --repo_env=PYTHON_BIN_PATH="$python" //:dyntrace.so
mkdir -p "dist/python$version"
install -m 0755 bazel-bin/dyntrace.so "dist/python$version/dyntrace.so"
echo "built dist/python$version/dyntrace.so: PYTHONPATH=$PWD/dist/python$version $python -c 'import dyntrace'"
