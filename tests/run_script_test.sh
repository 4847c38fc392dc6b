#!/bin/bash
# Runs a Python script (relative to the runfiles root) in tests/script_test's embedded interpreter.
set -euo pipefail
exec tests/script_test "$@"
