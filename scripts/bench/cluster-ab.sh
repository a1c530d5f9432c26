#!/usr/bin/env bash
# Alternating A/B of zkd builds on one zkbench workload through a 3-node cluster (one cluster at
# a time, started afresh for every round by cluster-profile.sh): throughput, the three servers'
# CPU per operation together, and the tail latencies.
#
#   scripts/bench/cluster-ab.sh WORKLOAD ROUNDS BIN_A BIN_B [zkbench flags...]
#
# CLUSTER_PROFILE_LEADER_ONLY=1 or CLUSTER_PROFILE_FOLLOWER_ONLY=1 put every client on the
# leader or on one follower (cluster-profile.sh). The machine is shared and noisy: compare rounds
# side by side, never single runs.
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
w=$1 rounds=$2 a=$3 b=$4
shift 4
dir=$(cd "$(dirname "$0")" && pwd)
out=$(mktemp -d "${TMPDIR:-/tmp}/zkd-cluster-ab.XXXXXX")
trap 'rm -rf "$out"' EXIT
for _ in $(seq "$rounds"); do
	for bin in "$a" "$b"; do
		CLUSTER_PROFILE_OFF=1 "$dir/cluster-profile.sh" "$bin" "$w" "$out" "$@" >"$out/text" 2>"$out/err" || { cat "$out/err" >&2; exit 1; }
		lat() { grep -o "\"$1\":[0-9.]*" "$out/bench.json" | head -n 1 | cut -d: -f2; }
		awk -v bin="$bin" -v p99="$(lat p99_us)" -v p999="$(lat p999_us)" '
			/ops\/s/ { tp = $2 }
			/us of CPU per op/ { cpu += $2 }
			END { printf "%s\tops/s %.0f\tservers CPU %.1f us/op\tp99 %.2f p99.9 %.2f ms\n", bin, tp, cpu, p99 / 1e3, p999 / 1e3 }' "$out/text"
	done
done
