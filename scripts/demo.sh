#!/usr/bin/env bash
# Installs what is needed, builds, and starts the demo (emulator + sidecar +
# sample sessions); the admin page URL is printed. Ctrl-C stops it.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$(nproc)"
exec ./build/failproofai-sidecar demo "$@"
