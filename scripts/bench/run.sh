#!/usr/bin/env bash
# Side-by-side benchmark of zkd against Apache ZooKeeper; writes docs/benchmarks.md.
#
#   scripts/bench/run.sh [zkbench compare flags...]
#
# Builds cmd/zkbench and (if it exists and builds) cmd/zkd into a temporary directory, then runs
# `zkbench compare`, which starts Apache ZooKeeper (Debian's zookeeper package, through
# internal/testkit/apachezk) and zkd with fsync on, standalone and as 3-node clusters on loopback ports
# 24100-24499, alternates and repeats the runs, measures memory, startup and kill -9 recovery, and
# latency on a 1M-znode tree with snapshots off and on, and writes the report. The floor server
# (cmd/zkbench/floor.go, replicated for 3 nodes) runs in the same rotation as a yardstick. Without zkd it
# measures ZooKeeper alone and says so in the report.
#
# Useful flags: -duration 10s -repeat 3 -topologies standalone,cluster -only get,set
#               -memory 100000,1000000 -snapshot-znodes 1000000 -snapshot-count 10000
#               -snapshot-rate 5000 -out docs/benchmarks.md -raw results.json
# A full run with the defaults takes about 40 minutes on a 2-core machine; for a quick look:
#   scripts/bench/run.sh -duration 3s -repeat 1 -memory 100000 -snapshot-znodes 100000
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/zkbench-build.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
# The commit zkd is built from, for the report: read now, since the tree may move on during the run.
ZKBENCH_COMMIT=$(git rev-parse --short HEAD 2>/dev/null || echo unknown)
if [ -n "$(git status --porcelain --untracked-files=all -- cmd/zkd server consensus znode jute 2>/dev/null)" ]; then
	ZKBENCH_COMMIT="$ZKBENCH_COMMIT plus uncommitted changes in the server packages"
fi
export ZKBENCH_COMMIT
go build -o "$tmp/zkbench" ./cmd/zkbench
zkd_flags=()
if [ -f cmd/zkd/main.go ]; then
	if go build -o "$tmp/zkd" ./cmd/zkd; then
		zkd_flags=(-zkd "$tmp/zkd")
	else
		zkd_flags=(-zkd-missing "cmd/zkd does not build")
	fi
else
	zkd_flags=(-zkd-missing "cmd/zkd does not exist yet")
fi
export ZKBENCH_COMMAND="scripts/bench/run.sh${*:+ $*}"
# -floor: the floor server (zkbench floor) runs beside them in each topology, so that the report says
# how much of what the machine allows each server reaches.
"$tmp/zkbench" compare -floor "${zkd_flags[@]}" "$@"
