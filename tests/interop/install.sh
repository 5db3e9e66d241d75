#!/usr/bin/env bash
# Install the third-party MCP servers that tests/test_interop.py and bench/search.py run, at pinned versions:
#   * npm, into tests/interop/node_modules, from package-lock.json: @modelcontextprotocol/server-everything
#     (interop tests), and for the search bench's retrieval set server-filesystem, server-memory,
#     server-sequential-thinking, server-github, @playwright/mcp (no browser is downloaded: the
#     playwright package only fetches one on `npx playwright install`) and @notionhq/notion-mcp-server;
#   * mcp-server-time (PyPI) into its own venv tests/interop/.venv-time, from requirements-time.txt
#     (it needs the mcp SDK 1.x, which conflicts with the project's mcp==2.3.0);
#   * mcp-server-git and mcp-server-fetch (PyPI) into tests/interop/.venv-servers, from
#     requirements-servers.txt (their own venv keeps GitPython, lxml ... out of the project's);
#   * Claude Code (npm, the host tests/hosts drives) into tests/hosts/node_modules, from tests/hosts/package-lock.json.
#     Its own lock and stamp: its native binary (~245 MB, the one optional dependency that matches this platform) is
#     not fetched again when a server pin above changes. --ignore-scripts: its postinstall only copies that binary
#     over a placeholder, and the tests run the platform package's binary directly.
# The search bench's part adds ~4 s to npm ci and ~12 s of pip from empty caches (bench/RESULTS.md, issue 26).
# Idempotent: each part is skipped while its stamp matches its lock file. Exits non-zero on any failure.
set -euo pipefail
cd "$(dirname "$0")"

PYTHON="${PYTHON:-python3}"

stamp_of() { sha256sum "$1" | cut -d' ' -f1; }

fresh() {  # fresh STAMP_FILE LOCK_FILE: the install recorded in STAMP_FILE was made from LOCK_FILE as it is now
    [[ -f "$1" && "$(cat "$1")" == "$(stamp_of "$2")" ]]
}

if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
    echo "interop install: node and npm are required for @modelcontextprotocol/server-everything and the other npm servers" >&2
    exit 1
fi

if fresh node_modules/.interop-stamp package-lock.json; then
    echo "== interop: npm servers already installed"
else
    echo "== interop: npm ci (server-everything and the search bench's npm servers, pinned by package-lock.json)"
    rm -rf node_modules
    npm ci --no-audit --no-fund --loglevel=error
    stamp_of package-lock.json >node_modules/.interop-stamp
fi

if fresh ../hosts/node_modules/.hosts-stamp ../hosts/package-lock.json; then
    echo "== hosts: Claude Code already installed"
else
    echo "== hosts: npm ci --ignore-scripts (Claude Code, pinned by tests/hosts/package-lock.json)"
    rm -rf ../hosts/node_modules
    (cd ../hosts && npm ci --ignore-scripts --no-audit --no-fund --loglevel=error)
    stamp_of ../hosts/package-lock.json >../hosts/node_modules/.hosts-stamp
fi

python_servers() {  # python_servers VENV REQUIREMENTS EXECUTABLE WHAT: one pinned venv, skipped while fresh
    local venv="$1" requirements="$2" executable="$3" what="$4"
    if fresh "$venv/.interop-stamp" "$requirements" && [[ -x "$venv/bin/$executable" ]]; then
        echo "== interop: $what already installed"
        return
    fi
    echo "== interop: venv $venv + pip install -r $requirements ($what)"
    rm -rf "$venv"
    "$PYTHON" -m venv "$venv"
    echo '*' >"$venv/.gitignore"  # as Python 3.13's venv writes: never committed, whatever .gitignore says
    "$venv/bin/pip" install -q -r "$requirements"
    stamp_of "$requirements" >"$venv/.interop-stamp"
}

python_servers .venv-time requirements-time.txt mcp-server-time "mcp-server-time"
python_servers .venv-servers requirements-servers.txt mcp-server-git "mcp-server-git, mcp-server-fetch"
