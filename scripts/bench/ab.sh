#!/usr/bin/env bash
# Alternating A/B of zkd builds on one zkbench workload, standalone, one server at a time:
# throughput, the server's CPU per operation (user+system from /proc, all threads) and the tail
# latencies (p99, p99.9, max), and its read and write system calls per operation (/proc/PID/io).
#
#   scripts/bench/ab.sh WORKLOAD ROUNDS BIN_A BIN_B [zkbench flags...]
#
# e.g. build the two revisions first:
#   git stash; go build -o /tmp/zkd-a ./cmd/zkd; git stash pop; go build -o /tmp/zkd-b ./cmd/zkd
#   scripts/bench/ab.sh session 4 /tmp/zkd-a /tmp/zkd-b
#   scripts/bench/ab.sh set 3 /tmp/zkd-a /tmp/zkd-b -clients 1 -conns 1
# The machine is shared and noisy: compare rounds side by side, never single runs.
set -euo pipefail
[ $# -ge 4 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
w=$1 rounds=$2 a=$3 b=$4
shift 4
. "$(dirname "$0")/lib.sh"
bench_setup ab
port=${AB_PORT:-21817}
cpu() { awk '{print $14+$15}' "/proc/$1/stat"; }
sysc() { awk '/^sysc[rw]:/ {printf "%s ", $2}' "/proc/$1/io"; }
ticks=$(getconf CLK_TCK)
for _ in $(seq "$rounds"); do
	for bin in "$a" "$b"; do
		rm -rf "$tmp/data" && mkdir -p "$tmp/data"
		# maxClientCnxns=0: the lock and watch workloads open more than ZooKeeper's default
		# 60 connections from one address; ruok tells when the server is up.
		printf 'dataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\n4lw.commands.whitelist=*\n' \
			"$tmp/data" "$port" >"$tmp/zoo.cfg"
		bench_start "$port" "$bin" -config "$tmp/zoo.cfg" -admin off
		c0=$(cpu "$pid") s0=$(sysc "$pid")
		"$tmp/zkbench" -addr "127.0.0.1:$port" -workload "$w" -duration 6s -json "$@" >"$tmp/out.json" 2>/dev/null
		c1=$(cpu "$pid") s1=$(sysc "$pid")
		bench_stop
		ops=$(grep -o '"ops":[0-9]*' "$tmp/out.json" | cut -d: -f2)
		tp=$(grep -o '"throughput":[0-9.]*' "$tmp/out.json" | cut -d: -f2)
		lat() { grep -o "\"$1\":[0-9.]*" "$tmp/out.json" | cut -d: -f2; }
		awk -v bin="$bin" -v tp="$tp" -v c="$((c1 - c0))" -v ops="$ops" -v hz="$ticks" \
			-v p99="$(lat p99_us)" -v p999="$(lat p999_us)" -v mx="$(lat max_us)" -v s="$s0 $s1" \
			'BEGIN { split(s, x, " "); printf "%s\tops/s %.0f\tserver CPU %.1f us/op\treads %.2f writes %.2f /op\tp99 %.2f p99.9 %.2f max %.1f ms\n", bin, tp, c * 1e6 / hz / ops, (x[3] - x[1]) / ops, (x[4] - x[2]) / ops, p99 / 1e3, p999 / 1e3, mx / 1e3 }'
	done
done
