#!/bin/bash
# Quickstart step 2: install what is missing, then build and run every test under CPython 3.11
# (Debian's, with numpy) and CPython 3.12 (pyenv's, without numpy), plus the Python case files
# straight under each interpreter.
set -euo pipefail
cd "$(dirname "$0")/.."
tools/install_deps.sh
source tools/pythons.sh
interpreters=("$python_311")
if [[ -n "$python_312" ]]; then
  interpreters+=("$python_312")
else
  echo "test.sh: no CPython 3.12 found (python3.12 on PATH or pyenv); testing 3.11 only" >&2
fi
# Kernels the suites compile are shared by both interpreters and kept between runs (the cache
# key covers the source, compiler and flags, so a stale entry can't be loaded). Tests of the cache
# itself use directories of their own.
kernel_cache="${DYNTRACE_TEST_CACHE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/dyntrace-tests}"
mkdir -p "$kernel_cache"
chmod 700 "$kernel_cache"
# Where CUDA's NVRTC is installed, the NVRTC tests must run: a missing or broken NVRTC fails them
# instead of skipping (DYNTRACE_REQUIRE_NVRTC=1).
require_nvrtc=()
if compgen -G "${CUDA_HOME:-/usr/local/cuda}/lib64/libnvrtc.so*" >/dev/null; then
  require_nvrtc=(--test_env=DYNTRACE_REQUIRE_NVRTC=1)
  echo "test.sh: NVRTC found under ${CUDA_HOME:-/usr/local/cuda}: NVRTC tests are required to run"
fi
for python in "${interpreters[@]}"; do
  echo "=== bazel test //... with $python"
  # Debian's python3 has numpy (install_deps.sh): tests that compare with it must not skip there.
  require_numpy=()
  [[ "$python" == "$python_311" ]] && require_numpy=(--test_env=DYNTRACE_REQUIRE_NUMPY=1)
  # Bazel runs several tests at once on few cores: OpenMP threads that spin at barriers while
  # another test holds the other core turned a 12 ms training step into 50 ms (a dry run past its
  # timeout); passive waiting gives the core back.
  bazel test --repo_env=PYTHON_BIN_PATH="$python" "${require_nvrtc[@]}" "${require_numpy[@]}" \
    --test_env=DYNTRACE_CACHE_DIR="$kernel_cache" --test_env=OMP_WAIT_POLICY=passive \
    --sandbox_writable_path="$kernel_cache" //...
done
