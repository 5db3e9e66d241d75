#!/usr/bin/env bash
# Install the third-party MCP servers that tests/test_interop.py runs, at pinned versions:
#   * @modelcontextprotocol/server-everything (npm) into tests/interop/node_modules, from package-lock.json;
#   * mcp-server-time (PyPI) into its own venv tests/interop/.venv-time, from requirements-time.txt
#     (it needs the mcp SDK 1.x, which conflicts with the project's mcp==2.3.0).
# Idempotent: each part is skipped while its stamp matches its lock file. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")"

PYTHON="${PYTHON:-python3}"

stamp_of() { sha256sum "$1" | cut -d' ' -f1; }

fresh() {  # fresh STAMP_FILE LOCK_FILE: the install recorded in STAMP_FILE was made from LOCK_FILE as it is now
    [[ -f "$1" && "$(cat "$1")" == "$(stamp_of "$2")" ]]
}

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "interop install: node and npm are required for @modelcontextprotocol/server-everything" >&2
    exit 1
fi

if fresh node_modules/.interop-stamp package-lock.json; then
    echo "== interop: server-everything already installed"
else
    echo "== interop: npm ci (server-everything, pinned by package-lock.json)"
    rm -rf node_modules
    npm ci --no-audit --no-fund --loglevel=error
    stamp_of package-lock.json >node_modules/.interop-stamp
fi

if fresh .venv-time/.interop-stamp requirements-time.txt && [[ -x .venv-time/bin/mcp-server-time ]]; then
    echo "== interop: mcp-server-time already installed"
else
    echo "== interop: venv .venv-time + pip install -r requirements-time.txt (mcp-server-time)"
    rm -rf .venv-time
    "$PYTHON" -m venv .venv-time
    .venv-time/bin/pip install -q -r requirements-time.txt
    stamp_of requirements-time.txt >.venv-time/.interop-stamp
fi
