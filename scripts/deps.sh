#!/usr/bin/env bash
# Installs every Debian package milc's build, tests, fuzzers and benchmarks need.
# Idempotent; run as root (or with sudo available).
set -euo pipefail
SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO=sudo; fi
PKGS=(
  build-essential cmake pkg-config clang libclang-rt-dev   # toolchain, libFuzzer, sanitizers
  libxml2-dev          # template XML
  liblmdb-dev lmdb-utils   # the artifact cache
  libxxhash-dev xxhash # XXH3-128 keys and checksums; xxhsum is the tests' independent reference
  libjansson-dev       # JSON: safetensors headers, manifests, --json output parsing in tests
  python3 python3-numpy python3-torch   # numeric references in tests
  python3-matplotlib   # examples/plot_bench.py
  libprotobuf-c-dev protobuf-c-compiler   # Core ML packages: the Model protobuf
  libhiredis-dev redis-server             # the shared remote cache tier and its tests
  libsodium-dev        # keyed MACs over what comes back from a shared remote
  libssl-dev           # libcrypto's Poly1305 for those MACs (twice libsodium's speed)
  clang-format         # the project's code style (.clang-format)
)
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -qq
$SUDO apt-get install -y -qq --no-install-recommends "${PKGS[@]}" >/dev/null
