#!/usr/bin/env bash
# Alternating rounds of `zkd import` by several zkd builds on one ZooKeeper data directory: wall
# time, user and system CPU and peak RSS of each run (/usr/bin/time). Each round imports into a
# new directory, removed after; the first build's and the last build's snapshots of the last
# round are compared byte for byte (the snapshot depends only on the tree, so builds that import
# the same tree write the same state.bin).
#
#   scripts/bench/import-ab.sh ZKDIR ROUNDS BIN...
#
# ZKDIR holds ZooKeeper's data/ and txnlog/ (the scale suite's layout: build one with
# `zkbench scale -servers zookeeper -work DIR -wide 1000000 -sessions 0 -locks 0
# -failover-sessions 0 -follower-znodes 0`, its zookeeper/ subdirectory). OUT (default a new
# temporary directory) is where the imports go. The machine is shared and noisy: compare rounds
# side by side, never single runs.
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,14p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
zk=$1 rounds=$2
shift 2
out=${OUT:-$(mktemp -d "${TMPDIR:-/tmp}/import-ab.XXXXXX")}
trap 'rm -rf "$out"' EXIT
for r in $(seq "$rounds"); do
	for bin in "$@"; do
		dst="$out/$(basename "$bin")"
		rm -rf "$dst"
		sync
		load=$(cut -d' ' -f1 /proc/loadavg)
		if ! /usr/bin/time -f "%e %U %S %M" -o "$out/time" "$bin" import -from "$zk/data" -from-log "$zk/txnlog" -data "$dst" >"$out/log" 2>&1; then
			echo "$bin failed:" >&2
			cat "$out/log" >&2
			exit 1
		fi
		read -r e u s m <"$out/time"
		echo "round $r $(basename "$bin"): wall $e s, user $u s, sys $s s, peak RSS $((m / 1024)) MB (load average before $load)"
		if [ "$r" -lt "$rounds" ] || { [ "$bin" != "$1" ] && [ "$bin" != "${!#}" ]; }; then
			rm -rf "$dst"
		fi
	done
done
first=$(find "$out/$(basename "$1")" -name state.bin)
last=$(find "$out/$(basename "${!#}")" -name state.bin)
if cmp -s "$first" "$last"; then
	echo "the snapshots of $(basename "$1") and $(basename "${!#}") are identical"
else
	echo "the snapshots of $(basename "$1") and $(basename "${!#}") differ" >&2
	exit 1
fi
