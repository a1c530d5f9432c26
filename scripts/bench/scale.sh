#!/usr/bin/env bash
# The scale suite: zkd beside Apache ZooKeeper on a ClickHouse-shaped tree of SCALE_ZNODES znodes
# (default 10 M), a node of SCALE_WIDE children (default 1 M), SCALE_SESSIONS idle sessions
# (default 10 k) holding SCALE_WATCHES watches (default 1 M), kill -9 restarts and `zkd import` of
# ZooKeeper's data directory. Writes the scale section of docs/benchmarks.md (SCALE_OUT to write
# elsewhere) and the raw figures to scale.json in the working directory.
#
#   scripts/bench/scale.sh [zkbench scale flags...]
#
# ZooKeeper gets -Xmx of SCALE_ZK_HEAP_MB (default 14336: the 10 M tree's live heap with room to
# spare). Each server runs alone; the whole run takes about half an hour at the defaults on a
# 2-core machine. `make test-zookeeper` runs a small form of it (cmd/zkbench's TestScale).
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zkbench-scale.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
commit=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
go build -o "$tmp/zkbench" ./cmd/zkbench
go build -o "$tmp/zkd" ./cmd/zkd
args=(-zkd "$tmp/zkd" -work "$tmp/work"
	-znodes "${SCALE_ZNODES:-10000000}" -wide "${SCALE_WIDE:-1000000}"
	-sessions "${SCALE_SESSIONS:-10000}" -watches "${SCALE_WATCHES:-1000000}"
	-zookeeper-heap-mb "${SCALE_ZK_HEAP_MB:-14336}")
export ZKBENCH_COMMAND="scripts/bench/scale.sh${*:+ $*} (SCALE_ZNODES=${SCALE_ZNODES:-10000000} SCALE_WIDE=${SCALE_WIDE:-1000000} SCALE_SESSIONS=${SCALE_SESSIONS:-10000} SCALE_WATCHES=${SCALE_WATCHES:-1000000} SCALE_ZK_HEAP_MB=${SCALE_ZK_HEAP_MB:-14336}, zkd at $commit)"
"$tmp/zkbench" scale "${args[@]}" -out "${SCALE_OUT:-docs/benchmarks.md}" -raw scale.json "$@"
