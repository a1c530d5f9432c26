#!/usr/bin/env bash
# Resident size of a standalone zkd after a bulk load: zkbench populate creates N znodes of 128 B
# in multis of 100 over 8 connections, then the server idles 4 s (long enough for its own trim of
# free memory). Prints VmRSS and the live heap after the last collection (GODEBUG=gctrace=1).
#
#   scripts/bench/memload.sh BIN [N]        (N defaults to 1000000)
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,6p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
bin=$1 n=${2:-1000000}
. "$(dirname "$0")/lib.sh"
bench_setup memload
port=${MEMLOAD_PORT:-21831}
mkdir -p "$tmp/data"
bench_start "$port" env GODEBUG=gctrace=1 "$bin" -addr "127.0.0.1:$port" -data "$tmp/data" -admin off
"$tmp/zkbench" populate -addr "127.0.0.1:$port" -n "$n" -size 128 -conns 8 -root /zkbench-mem | tail -n 1
sleep 4
rss=$(awk '/^VmRSS:/ {print $2}' "/proc/$pid/status")
anon=$(awk '/^RssAnon:/ {print $2}' "/proc/$pid/status")
file=$(awk '/^RssFile:/ {print $2}' "/proc/$pid/status")
live=$(grep '^gc ' "$tmp/log" | tail -n 1 | grep -o '[0-9]*->[0-9]*->[0-9]* MB' | sed 's/.*->//')
echo "$bin: $n znodes, VmRSS $((rss / 1024)) MB (anonymous $((anon / 1024)), file-backed $((file / 1024))), live heap after the last collection $live"
