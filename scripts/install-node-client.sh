#!/usr/bin/env bash
# Installs the npm package node-zookeeper-client (pure JavaScript), one of the clients the client
# matrix (clientmatrix/) drives, into a cache directory outside the repository: $ZKD_NPM_DIR, or
# ~/.cache/zkd-npm. The matrix looks there and skips the Node column when it is not installed.
# Needs node and npm; does nothing when the package is already there.
set -euo pipefail
dir="${ZKD_NPM_DIR:-$HOME/.cache/zkd-npm}"
version="1.1.3"
if [ -f "$dir/node_modules/node-zookeeper-client/package.json" ] &&
	grep -q "\"version\": \"$version\"" "$dir/node_modules/node-zookeeper-client/package.json"; then
	exit 0
fi
command -v npm >/dev/null || { echo "install-node-client: npm not found (apt-get install npm)" >&2; exit 1; }
mkdir -p "$dir"
npm install --prefix "$dir" --no-audit --no-fund --silent "node-zookeeper-client@$version"
