#!/usr/bin/env bash
# Server memory per idle session (zkbench idle: N sessions that only ping, held for 20 s), for a
# zkd binary and for Apache ZooKeeper (-Xmx1000m), one after the other.
#
#   scripts/bench/idlemem.sh BIN [N]        (N defaults to 5000; needs ulimit -n above N)
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,5p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
bin=$1 n=${2:-5000}
. "$(dirname "$0")/lib.sh"
bench_setup idlemem
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
port=${IDLEMEM_PORT:-21833}

mkdir -p "$tmp/data"
printf 'dataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\nadmin.enableServer=false\n' "$tmp/data" "$port" >"$tmp/zoo.cfg"
bench_start "$port" "$bin" -config "$tmp/zoo.cfg"
echo "== $bin"
"$tmp/zkbench" idle -addr "127.0.0.1:$port" -pid "$pid" -sessions "$n"
bench_stop

mkdir -p "$tmp/zk"
bench_start "$port" "$tmp/zkbench" zookeeper -addr "127.0.0.1:$port" -dir "$tmp/zk" -cfg maxClientCnxns=0 -heap-mb 1000
jvm=$(ss -ltnpH "sport = :$port" | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2)
echo "== Apache ZooKeeper"
"$tmp/zkbench" idle -addr "127.0.0.1:$port" -pid "${jvm:-$pid}" -sessions "$n"
