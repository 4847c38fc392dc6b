#!/bin/bash
# Imports _smoke.so with the configured interpreter.
# Usage: extension_test.sh PYTHON_BIN path/to/_smoke.so
set -euo pipefail
python="$1"
module="$2"

# Extension modules get CPython's symbols from the interpreter that loads
# them; linking libpython would load a second copy.
if readelf -d "$module" | grep -q 'NEEDED.*libpython'; then
  echo "FAIL: $module links libpython" >&2
  exit 1
fi

# Under --config=asan the module needs the sanitizer runtimes, which must be
# loaded before everything else; the interpreter itself is not instrumented.
preload=$(ldd "$module" | awk '/lib(asan|ubsan)\.so/ {print $3}' | paste -sd: -)
if [[ -n "$preload" ]]; then
  export LD_PRELOAD="$preload"
  export ASAN_OPTIONS="${ASAN_OPTIONS:-}:detect_leaks=0"
fi

PYTHONPATH="$(dirname "$module")" "$python" - <<'PY'
import platform, _smoke
assert _smoke.add(2, 40) == 42
assert _smoke.built_for == platform.python_version(), (
    _smoke.built_for, platform.python_version())
print("imported", _smoke.__file__, "into Python", platform.python_version())
PY
