#!/usr/bin/env bash
# Alternating A/B of zkd builds on the snapshot-latency load of docs/benchmarks.md, zkd alone:
# a standalone server on a tree of ZNODES znodes of 128 B (default 1000000, created once and copied
# for every run), open-loop setData at 5000/s from 32 clients over 8 connections for 10 s after 5 s
# unrecorded, with SNAPCFG as the snapshot settings (default snapCount=10000: a snapshot about
# every 2 s). Prints p50, p99, p99.9 and max per run.
#
#   scripts/bench/snapab.sh ROUNDS BIN_A BIN_B...
#   SNAPCFG=$'snapCount=1000000000\nsnapSizeLimitInKb=-1' scripts/bench/snapab.sh 2 /tmp/zkd-a
# As root, the page cache is synced and its clean pages dropped before each run.
set -euo pipefail
[ $# -ge 2 ] || { sed -n '2,10p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
rounds=$1
shift
. "$(dirname "$0")/lib.sh"
bench_setup snapab
port=${SNAPAB_PORT:-21819}
znodes=${ZNODES:-1000000}
config() {
	printf 'dataDir=%s/data\nclientPort=%s\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\n4lw.commands.whitelist=*\n%s\n' \
		"$tmp" "$port" "$1" >"$tmp/zoo.cfg"
}
load() {
	"$tmp/zkbench" -addr "127.0.0.1:$port" -workload set -clients 32 -conns 8 -keys 1000 -rate 5000 -json "$@"
}
mkdir -p "$tmp/data"
config 'snapCount=1000000000'
bench_start "$port" "$1" -config "$tmp/zoo.cfg" -admin off
"$tmp/zkbench" populate -addr "127.0.0.1:$port" -n "$znodes" -conns 8 >/dev/null
bench_stop
mv "$tmp/data" "$tmp/base"
for _ in $(seq "$rounds"); do
	for bin in "$@"; do
		rm -rf "$tmp/data" && cp -a "$tmp/base" "$tmp/data"
		config "${SNAPCFG:-snapCount=10000}"
		if [ "$(id -u)" = 0 ]; then
			sync && echo 1 >/proc/sys/vm/drop_caches
		fi
		bench_start "$port" "$bin" -config "$tmp/zoo.cfg" -admin off
		load -duration 5s >/dev/null
		load -duration 10s >"$tmp/out.json"
		bench_stop
		lat() { grep -o "\"$1\":[0-9.]*" "$tmp/out.json" | cut -d: -f2; }
		awk -v bin="$bin" -v p50="$(lat p50_us)" -v p99="$(lat p99_us)" -v p999="$(lat p999_us)" -v mx="$(lat max_us)" \
			'BEGIN { printf "%s\tp50 %.2f p99 %.2f p99.9 %.2f max %.1f ms\n", bin, p50 / 1e3, p99 / 1e3, p999 / 1e3, mx / 1e3 }'
	done
done
