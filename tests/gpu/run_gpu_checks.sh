#!/bin/bash
# dyntrace's GPU checks, from the bundle tools/build_gpu_bundle.sh makes (no Bazel needed):
#   tar xzf gpu-bundle.tar.gz && gpu-bundle/run_gpu_checks.sh [--python python3] [--log FILE] [--quick]
#                                                             [--budget SECONDS]
# Stages, each under a timeout (--budget, 470 seconds by default, so that all ends within 8
# minutes): the C++ GPU tests (bin/), the CUDA Python tests
# (tests/python/runner.py), the dyntrace command on a small script, and tests/gpu/gpu_check.py
# (correctness corpus, bandwidth, CUDA-graph replay, torch.compile). The full output goes to the
# log (default gpu-bundle/gpu_check.log); stdout gets one line per stage, gpu_check's table and a
# summary. Exit status: 0 all passed, 1 something failed, 2 no GPU (and nothing else failed),
# 3 the bundle cannot run here (wrong Python, too old a glibc, missing files).
# From a repository checkout, tests/gpu/run_gpu_checks.sh runs dist/gpu-bundle's copy.
set -uo pipefail
here=$(cd "$(dirname "$0")" && pwd)
if [[ ! -f "$here/dyntrace.so" ]]; then
  bundle=$here/../../dist/gpu-bundle
  if [[ -x "$bundle/run_gpu_checks.sh" ]]; then exec "$bundle/run_gpu_checks.sh" "$@"; fi
  echo "run_gpu_checks: no bundle here; build it first: tools/build_gpu_bundle.sh" >&2
  exit 3
fi
root=$here
python=python3
log=$root/gpu_check.log
quick=()
budget=470
# The torch.compile child runs with the caller's loader path: the folders added below for
# dyntrace's dlopen calls could hand PyTorch another build of cuBLAS than its own.
export GPU_CHECK_TORCH_LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-}
while (( $# )); do
  case "$1" in
    --python) python=${2:?--python needs a path}; shift 2 ;;
    --log) log=${2:?--log needs a file}; shift 2 ;;
    --quick) quick=(--quick); shift ;;
    --budget) budget=${2:?--budget needs seconds}; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "run_gpu_checks: unknown argument $1 (see --help)" >&2; exit 3 ;;
  esac
done
: > "$log" || { echo "run_gpu_checks: cannot write $log" >&2; exit 3; }
say() { echo "$*" | tee -a "$log"; }

built_for=$(sed -n 's/^python: \([0-9]*\.[0-9]*\)\..*/\1/p' "$root/MANIFEST")
have=$("$python" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null)
if [[ -z "$have" || "$have" != "$built_for" ]]; then
  say "run_gpu_checks: the bundle is built for Python $built_for; $python is ${have:-not a working Python} (use --python)"
  exit 3
fi
# The bundled libraries were linked against Debian 12's glibc: an older one than they need
# cannot load them. `older A B`: whether version A is older than B.
older() { [[ "$1" != "$2" && "$(printf '%s\n' "$1" "$2" | sort -V | head -1)" == "$1" ]]; }
manifest_version() { sed -n "s|^$1.*$2\([0-9.]*\).*|\1|p" "$root/MANIFEST" | head -1; }
glibc_needed=$(manifest_version "needs: glibc with" GLIBC_)
glibc_here=$(getconf GNU_LIBC_VERSION 2>/dev/null | awk '{print $2}')
if [[ -n "$glibc_needed" && -n "$glibc_here" ]] && older "$glibc_here" "$glibc_needed"; then
  say "run_gpu_checks: the bundle needs glibc $glibc_needed; this machine has $glibc_here"
  exit 3
fi
# The C++ runtime: the machine's own when it has every symbol version the bundle needs, else the
# bundle's lib/cxx copy (which needs a newer glibc).
glibcxx_needed=$(manifest_version "c++ runtime:" GLIBCXX_)
glibc_for_cxx=$(manifest_version "c++ runtime:.*lib/cxx" GLIBC_)
system_cxx=$({ ldconfig -p || /sbin/ldconfig -p || /usr/sbin/ldconfig -p; } 2>/dev/null |
  awk '/libstdc\+\+\.so\.6 .*x86-64/ {print $NF; exit}')
for candidate in /usr/lib/x86_64-linux-gnu/libstdc++.so.6 /usr/lib64/libstdc++.so.6 /lib64/libstdc++.so.6; do
  [[ -z "$system_cxx" && -e "$candidate" ]] && system_cxx=$candidate
done
if [[ -n "$system_cxx" && -n "$glibcxx_needed" ]] && grep -qa "GLIBCXX_$glibcxx_needed" "$system_cxx"; then
  cxx_note="the system's $system_cxx"
elif [[ -z "$glibc_here" || -z "$glibc_for_cxx" ]] || ! older "$glibc_here" "$glibc_for_cxx"; then
  export LD_LIBRARY_PATH=$root/lib/cxx${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  cxx_note="the bundle's lib/cxx (the system's ${system_cxx:-libstdc++} lacks GLIBCXX_$glibcxx_needed)"
else
  say "run_gpu_checks: the bundle needs a libstdc++ with GLIBCXX_$glibcxx_needed; ${system_cxx:-the system libstdc++} lacks it, and the bundled one needs glibc $glibc_for_cxx (this machine: $glibc_here)"
  exit 3
fi
glibc_for_command=$(manifest_version "command needs: glibc with" GLIBC_)
say "run_gpu_checks: $(sed -n 2p "$root/MANIFEST"); $("$python" -c 'import sys; print(sys.executable, sys.version.split()[0])'); log $log"

# CUDA's libraries are opened by soname; add the usual toolkit folders (after the loader's own),
# then the pip wheels' folders of the Python that runs the checks (PyTorch's images ship NVRTC and
# cuBLAS only there), then the driver's folder when the loader's cache lacks libcuda.so.1.
loader_has() { { ldconfig -p || /sbin/ldconfig -p; } 2>/dev/null | grep -q "$1"; }
has_lib() { compgen -G "$1/$2*" >/dev/null; }
cuda_dirs=()
add_dir() { [[ -d "$1" && "$1" != /lib64 && " ${cuda_dirs[*]} " != *" $1 "* ]] && cuda_dirs+=("$1"); }
for d in "${CUDA_HOME:-}/lib64" /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  add_dir "$d"
done
wheel_root=$("$python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])' 2>/dev/null)
for d in "$wheel_root"/nvidia/cu13/lib "$wheel_root"/nvidia/*/lib; do
  if has_lib "$d" libnvrtc.so || has_lib "$d" libcublas.so; then add_dir "$d"; fi
done
if [[ -z "${DYNTRACE_LIBCUDA:-}" ]] && ! loader_has libcuda.so.1; then
  for d in /usr/local/nvidia/lib64 /usr/local/nvidia/lib /usr/lib/x86_64-linux-gnu /usr/lib64; do
    if has_lib "$d" libcuda.so.1; then add_dir "$d"; break; fi
  done
fi
if (( ${#cuda_dirs[@]} )); then
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$(IFS=:; echo "${cuda_dirs[*]}")
fi
export PYTHONPATH=$root
export DYNTRACE_CACHE_DIR=$root/.kernel-cache
mkdir -p -m 0700 "$DYNTRACE_CACHE_DIR"
say "environment: LD_LIBRARY_PATH=${LD_LIBRARY_PATH:-} PYTHONPATH=$PYTHONPATH DYNTRACE_CACHE_DIR=$DYNTRACE_CACHE_DIR; C++ runtime: $cxx_note"
nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader >> "$log" 2>&1 || say "(nvidia-smi not available)"

deadline=$((SECONDS + budget))
results=()
no_gpu=""
failed=0
# stage NAME SECONDS COMMAND...: runs COMMAND with its output in the log, under the smaller of
# SECONDS and what is left of the 8 minutes.
stage() {
  local name=$1 limit=$2; shift 2
  local left=$((deadline - SECONDS))
  (( limit > left )) && limit=$left
  if (( limit < 5 )); then
    results+=("$(printf '%-22s %-8s %s' "$name" SKIPPED 'out of time')"); failed=1; return
  fi
  local start=$SECONDS
  echo "=== $name (timeout ${limit}s): $*" >> "$log"
  timeout --kill-after=10 "$limit" "$@" >> "$log" 2>&1
  local rc=$?
  local verdict=PASS
  case $rc in
    0) ;;
    124|137) verdict=TIMEOUT; failed=1 ;;
    *) verdict="FAIL($rc)"; failed=1 ;;
  esac
  echo "=== $name: $verdict after $((SECONDS - start))s" >> "$log"
  results+=("$(printf '%-22s %-8s %4ss' "$name" "$verdict" $((SECONDS - start)))")
  echo "${results[-1]}"
}

stage "nvrtc_test" 60 "$root/bin/nvrtc_test"
stage "cuda_codegen_test" 60 "$root/bin/cuda_codegen_test"
python_tests=("$root/tests/python/test_cuda_runtime.py")
# test_cuda_codegen compiles with the cpu backend: it needs a host C++ compiler.
if command -v "${CXX:-c++}" >/dev/null 2>&1; then
  python_tests+=("$root/tests/python/test_cuda_codegen.py")
else
  results+=("$(printf '%-22s %-8s %s' test_cuda_codegen SKIPPED "no host C++ compiler (${CXX:-c++})")")
fi
stage "python tests" 150 "$python" "$root/tests/python/runner.py" "${python_tests[@]}"
# The command embeds the bundle's libpython and takes the standard library (and venv) of the
# Python that runs the checks.
python_path=$("$python" -c 'import sys; print(sys.executable)')
if [[ -n "$glibc_for_command" && -n "$glibc_here" ]] && older "$glibc_here" "$glibc_for_command"; then
  results+=("$(printf '%-22s %-8s %s' "dyntrace command" SKIPPED "its libpython needs glibc $glibc_for_command")")
  echo "${results[-1]}"
else
  stage "dyntrace command" 40 env DYNTRACE_PYTHON="$python_path" "$root/dyntrace" --stats "$root/tests/gpu/cli_smoke.py"
fi

# gpu_check: exit 2 means no GPU, which is not a failure of the stages above.
left=$((deadline - SECONDS))
start=$SECONDS
echo "=== gpu_check (timeout ${left}s)" >> "$log"
timeout --kill-after=10 "$left" "$python" "$root/tests/gpu/gpu_check.py" "${quick[@]}" \
  --time-limit $((left > 20 ? left - 10 : 10)) > "$root/.gpu_check.out" 2>&1
rc=$?
cat "$root/.gpu_check.out" >> "$log"
case $rc in
  0) verdict=PASS ;;
  2) verdict="NO GPU"; no_gpu=$(grep -m1 '^gpu_check: no GPU' "$root/.gpu_check.out") ;;
  124|137) verdict=TIMEOUT; failed=1 ;;
  *) verdict="FAIL($rc)"; failed=1 ;;
esac
results+=("$(printf '%-22s %-8s %4ss' gpu_check "$verdict" $((SECONDS - start)))")
echo "${results[-1]}"

# The table and failures from gpu_check, then one line per stage.
echo
sed -n '/^workload /,/^$/p; /^FAILED: /p' "$root/.gpu_check.out"
rm -f "$root/.gpu_check.out"
{
  echo "summary:"
  printf '  %s\n' "${results[@]}"
} | tee -a "$log"
if (( failed )); then
  say "run_gpu_checks: FAILED (details in $log)"
  exit 1
fi
if [[ -n "$no_gpu" ]]; then
  say "run_gpu_checks: ${no_gpu#gpu_check: }"
  exit 2
fi
say "run_gpu_checks: all passed (log: $log)"
exit 0
