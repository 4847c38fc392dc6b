#!/bin/bash
# Builds the bundle that runs dyntrace's GPU checks on a machine with a GPU but no Bazel:
#   dist/gpu-bundle/          dyntrace.so, the dyntrace command, the C++ GPU tests (bin/), the
#                             CUDA Python tests and tests/gpu/gpu_check.py, run_gpu_checks.sh,
#                             lib/ (every non-system shared library they need), python-dynload/
#                             (the embedded CPython's extension modules, for the command), MANIFEST
#   dist/gpu-bundle.tar.gz    the same, to copy over (at most 60 MB)
# Usage: tools/build_gpu_bundle.sh [path/to/python3.12]   (default: the 3.12 tools/pythons.sh finds)
# On the GPU machine: tar xzf gpu-bundle.tar.gz && gpu-bundle/run_gpu_checks.sh [--python python3]
set -euo pipefail
cd "$(dirname "$0")/.."
source tools/pythons.sh
python=${1:-$python_312}
if [[ -z "$python" || ! -x "$python" ]]; then
  echo "build_gpu_bundle: no CPython 3.12 found (pass its path)" >&2
  exit 1
fi
command -v patchelf >/dev/null || { echo "build_gpu_bundle: patchelf is missing (tools/install_deps.sh)" >&2; exit 1; }
max_bytes=$((60 * 1024 * 1024))

# Each bundled file, from its Bazel output, to its place in the bundle.
declare -A outputs=(
  [dyntrace.so]=bazel-bin/dyntrace.so
  [dyntrace]=bazel-bin/cli/dyntrace
  [bin/nvrtc_test]=bazel-bin/tests/nvrtc_test
  [bin/cuda_codegen_test]=bazel-bin/tests/cuda_codegen_test
  [tests/fake_cuda/libfake_cuda.so]=bazel-bin/tests/fake_cuda/libfake_cuda.so
  [tests/fake_cuda/libfake_cublas.so]=bazel-bin/tests/fake_cuda/libfake_cublas.so
)
# Plain -c opt: the toolchain's default target (x86-64), no -march flags (see .bazelrc); the
# host-specific -march=native is only used at run time, for the CPU kernels dyntrace compiles on
# the machine that runs them.
bazel build -c opt --repo_env=PYTHON_BIN_PATH="$python" \
  //:dyntrace.so //cli:dyntrace //tests:nvrtc_test //tests:cuda_codegen_test \
  //tests/fake_cuda:libfake_cuda.so //tests/fake_cuda:libfake_cublas.so

bundle=dist/gpu-bundle
rm -rf "$bundle" dist/gpu-bundle.tar.gz
mkdir -p "$bundle"/{lib/cxx,bin,tests/python,tests/gpu,tests/fake_cuda}
for dest in "${!outputs[@]}"; do
  install -m 0755 "${outputs[$dest]}" "$bundle/$dest"
done
# The embedded CPython's own extension modules: the GPU machine's standard library may build some
# of them into its interpreter (Debian and Ubuntu do: math, _struct ...), and its own builds of
# the others belong to its libpython. The dyntrace command puts this folder on the module path.
dynload=$("$python" -c 'import sysconfig; print(sysconfig.get_path("platstdlib"))')/lib-dynload
mkdir -p "$bundle/python-dynload"
for module in "$dynload"/*.so; do
  case "$(basename "$module")" in
    _test*|xx*|_xx*|_ctypes_test*|_tkinter*|_curses*|readline*|nis*|ossaudiodev*|spwd*) continue ;;
  esac
  install -m 0644 "$module" "$bundle/python-dynload/"
  strip --strip-unneeded "$bundle/python-dynload/$(basename "$module")"
done
python_files=(runner.py testlib.py cpulib.py jitlib.py test_cuda_runtime.py test_cuda_codegen.py)
for f in "${python_files[@]}"; do install -m 0644 "tests/python/$f" "$bundle/tests/python/$f"; done
install -m 0644 tests/gpu/gpu_check.py tests/gpu/gpu_training.py tests/gpu/cli_smoke.py "$bundle/tests/gpu/"
install -m 0755 tests/gpu/run_gpu_checks.sh "$bundle/run_gpu_checks.sh"

# System libraries stay out: glibc's own and the CUDA/NVIDIA ones (dlopen'ed on the GPU machine).
is_system() {
  [[ "$1" =~ ^(linux-vdso\.so|ld-linux|libc\.so|libm\.so|libdl\.so|libpthread\.so|librt\.so|libresolv\.so|libutil\.so|libcuda\.so|libnvrtc|libcublas|libnvidia) ]]
}
# The C++ runtime is taken from the GPU machine when it is new enough (a process that already
# loaded one, such as a Python with PyTorch, keeps its own): Debian 12's copy needs glibc 2.36,
# newer than Ubuntu 22.04's or RHEL 9's. It is shipped in lib/cxx/, off the RUNPATH, which
# run_gpu_checks.sh adds only when the machine's libstdc++ is too old.
is_cxx_runtime() {
  [[ "$1" =~ ^(libstdc\+\+\.so|libgcc_s\.so) ]]
}
# Every library the bundled ELF files need (ldd follows dependencies of dependencies; it is asked
# about the Bazel outputs, whose RUNPATHs find Bazel's own solib folder), copied with its soname
# as file name and stripped of debug symbols.
declare -A copied=()
for dest in "${!outputs[@]}"; do
  while read -r name arrow path _; do
    [[ "$arrow" == "=>" ]] || continue
    is_system "$name" && continue
    if [[ "$path" == "not" ]]; then
      echo "build_gpu_bundle: ${outputs[$dest]} needs $name, which is not found" >&2
      exit 1
    fi
    [[ -n "${copied[$name]:-}" ]] && continue
    copied[$name]=$path
    target=$bundle/lib/$name
    is_cxx_runtime "$name" && target=$bundle/lib/cxx/$name
    install -m 0644 "$(readlink -f "$path")" "$target"
    strip --strip-unneeded "$target"
  done < <(env -u LD_LIBRARY_PATH ldd "${outputs[$dest]}")
done
elves=()
for dest in "${!outputs[@]}"; do elves+=("$bundle/$dest"); done
# RUNPATH: the loader looks in the bundle's lib/ first, from wherever the bundle is unpacked.
for elf in "${elves[@]}"; do
  rel=$(realpath --relative-to="$(dirname "$elf")" "$bundle/lib")
  patchelf --set-rpath "\$ORIGIN/$rel" "$elf"
done
for lib in "$bundle"/lib/*.so*; do patchelf --set-rpath '$ORIGIN' "$lib"; done

# Nothing may resolve outside the bundle but the system libraries (and the C++ runtime, which
# resolves to the system's here as it will on a machine where it is new enough).
status=0
for elf in "${elves[@]}" "$bundle"/lib/*.so*; do
  while read -r name arrow path _; do
    [[ "$arrow" == "=>" ]] || continue
    is_system "$name" && continue
    is_cxx_runtime "$name" && continue
    case "$(readlink -f "$path")" in
      "$(readlink -f "$bundle")"/lib/*) ;;
      *) echo "build_gpu_bundle: $elf resolves $name to $path, outside the bundle" >&2; status=1 ;;
    esac
  done < <(env -u LD_LIBRARY_PATH ldd "$elf")
done
(( status == 0 )) || exit 1

# The newest glibc symbol version the module, the tests and their libraries need (the GPU
# machine's glibc must have it); the same for the dyntrace command's libpython and for the
# shipped C++ runtime; and the newest libstdc++ symbol version anything needs.
newest() { grep -o "$1[0-9][0-9.]*" | sort -u -V | tail -1; }
module_files=("${elves[@]}")
for f in "$bundle"/lib/*.so*; do [[ "$f" == */libpython* ]] || module_files+=("$f"); done
glibc_needed=$(for f in "${module_files[@]}"; do objdump -T "$f"; done | newest GLIBC_)
glibc_for_command=$(objdump -T "$bundle"/lib/libpython*.so* 2>/dev/null | newest GLIBC_)
glibc_for_cxx=$(for f in "$bundle"/lib/cxx/*; do objdump -T "$f"; done | newest GLIBC_)
glibcxx_needed=$(for f in "${module_files[@]}"; do objdump -T "$f"; done | newest GLIBCXX_)
commit=$(git rev-parse HEAD)
git diff --quiet HEAD -- || commit="$commit (with uncommitted changes)"
{
  echo "dyntrace GPU bundle"
  echo "commit: $commit"
  echo "built: $(date -u +%Y-%m-%dT%H:%M:%SZ) on $(. /etc/os-release && echo "$PRETTY_NAME"), $(uname -m)"
  echo "python: $("$python" -c 'import sys, sysconfig; print("%d.%d.%d" % sys.version_info[:3], sysconfig.get_config_var("SOABI"))') ($python)"
  echo "needs: glibc with $glibc_needed, x86-64; the NVIDIA driver (libcuda.so.1), libnvrtc and libcublas (CUDA 12 or 13) on the loader path or in /usr/local/cuda, CUDA_HOME"
  echo "command needs: glibc with ${glibc_for_command:-$glibc_needed}"
  echo "c++ runtime: libstdc++ with ${glibcxx_needed} from the system, else lib/cxx, which needs glibc with ${glibc_for_cxx}"
  echo "bazel: build -c opt --repo_env=PYTHON_BIN_PATH=$python"
  echo
  echo "bytes  file"
  (cd "$bundle" && find . -type f ! -name MANIFEST -printf '%s  %P\n' | sort -k2)
} > "$bundle/MANIFEST"

tar -C dist -czf dist/gpu-bundle.tar.gz gpu-bundle
size=$(stat -c %s dist/gpu-bundle.tar.gz)
echo "build_gpu_bundle: dist/gpu-bundle.tar.gz is $((size / 1024)) KiB ($(du -sh "$bundle" | cut -f1) unpacked, ${#copied[@]} libraries in lib/)"
if (( size > max_bytes )); then
  echo "build_gpu_bundle: the tarball exceeds 60 MB" >&2
  exit 1
fi
echo "build_gpu_bundle: on the GPU machine: tar xzf gpu-bundle.tar.gz && gpu-bundle/run_gpu_checks.sh [--python python3]"
