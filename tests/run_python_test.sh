#!/bin/bash
# Runs a Python test script with the interpreter dyntrace was configured for.
# Usage: run_python_test.sh PYTHON_BIN script.py [args...]
set -euo pipefail
python="$1"
shift
exec "$python" "$@"
