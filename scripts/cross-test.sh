#!/usr/bin/env bash
# cross-test.sh ARCH — builds milc's runtime (every kernel variant of ARCH)
# and its tests with Debian's cross compiler and runs them under qemu-user:
# the same numeric bounds as on the build machine.  Only the runtime and the
# OS layer (MILC_RUNTIME_ONLY): they need no -dev package of ARCH beyond the
# C library, and xxhash.h, header-only there, is the host's.
# Usage: scripts/cross-test.sh aarch64   (build dir: build-aarch64)
set -euo pipefail
arch=${1:-}
case $arch in
aarch64) triple=aarch64-linux-gnu; pkgs=(gcc-aarch64-linux-gnu libc6-dev-arm64-cross qemu-user) ;;
*) echo "usage: $0 aarch64" >&2; exit 2 ;;
esac
cd "$(dirname "$0")/.."
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=; [ "$(id -u)" = 0 ] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}"
fi
dir=build-$arch
cmake -S . -B "$dir" -DCMAKE_TOOLCHAIN_FILE="$PWD/cmake/$triple.cmake" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DMILC_WERROR=ON -DMILC_RUNTIME_ONLY=ON
cmake --build "$dir" -j"$(nproc)"
ctest --test-dir "$dir" --output-on-failure -j"$(nproc)"
