#!/bin/bash
# Installs the Debian 12 packages that the Bazel build uses. Safe to rerun:
# apt is only touched when a package is missing. The pyenv interpreters are
# optional and not installed here.
set -euo pipefail

packages=(
  bazel-bootstrap        # Bazel 4.2.3 (/usr/bin/bazel)
  default-jdk-headless   # Bazel's server runs on the system JDK
  g++
  libabsl-dev
  libgtest-dev
  libgmock-dev           # @com_google_googletest//:gmock
  libbenchmark-dev
  libdlpack-dev
  libopenblas-dev
  python3-dev            # default @local_python when python3 is Debian's
  python3-numpy
  graphviz                 # dot -Tsvg: graph pictures (dyntrace.graphs(fn, format="svg"), --report)
  chromium-headless-shell  # the --report test loads the HTML report in headless Chromium
  libpython3.11-testsuite  # CPython 3.11's `test` package: tests/cpython/run_regrtests.py
  patchelf                 # tools/build_gpu_bundle.sh points the bundled binaries at their lib/
)

missing=()
for package in "${packages[@]}"; do
  status=$(dpkg-query -W -f='${Status}' "$package" 2>/dev/null || true)
  if [[ "$status" != "install ok installed" ]]; then
    missing+=("$package")
  fi
done

if (( ${#missing[@]} == 0 )); then
  echo "install_deps: all ${#packages[@]} packages are installed"
  exit 0
fi

sudo=()
if (( EUID != 0 )); then
  if ! command -v sudo >/dev/null; then
    echo "install_deps: run as root to install: ${missing[*]}" >&2
    exit 1
  fi
  sudo=(sudo)
fi

echo "install_deps: installing ${missing[*]}"
# A fresh image has empty package lists, so refresh them before installing.
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update
"${sudo[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y --no-install-recommends "${missing[@]}"
