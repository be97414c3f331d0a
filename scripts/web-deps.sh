#!/usr/bin/env bash
# Installs the browser test's npm packages (playwright-core drives Debian's
# chromium; no browser is downloaded). Idempotent.
set -euo pipefail
cd "$(dirname "$0")/../tests/browser" 2>/dev/null || exit 0
[ -f package.json ] || exit 0
if [ ! -d node_modules ] || [ package.json -nt node_modules ]; then
  npm install --no-audit --no-fund --loglevel=error
fi
