#!/usr/bin/env bash
# Installs every Debian package the build, the tests and the benchmarks need.
# Idempotent: safe to run again; exits non-zero if anything cannot be installed.
set -euo pipefail

PACKAGES=(
  # build
  build-essential cmake pkg-config clang-format clang-tidy
  # core libraries
  libcurl4-gnutls-dev libmicrohttpd-dev libjansson-dev libsqlite3-dev sqlite3
  libseccomp-dev libgmp-dev libutf8proc-dev libgc-dev uuid-dev nettle-dev libzstd-dev
  # tests
  libcmocka-dev python3 python3-prometheus-client python3-yaml ca-certificates curl procps
  prometheus  # promtool: checks deploy/prometheus-rules.yaml and the /metrics exposition
  # benchmarks
  wrk hyperfine
  # browser tests (Node.js/npm come with the machine or are installed below)
  chromium
)

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi

missing=()
for p in "${PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
export DEBIAN_FRONTEND=noninteractive
if [ "${#missing[@]}" -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
else
  echo "install-deps: installing ${missing[*]}"
  $SUDO apt-get update
  $SUDO apt-get install -y --no-install-recommends "${PACKAGES[@]}"
fi

# Node.js for the browser test: keep a machine-provided node, else Debian's.
if ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; then
  $SUDO apt-get install -y --no-install-recommends nodejs npm
fi
