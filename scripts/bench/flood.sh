#!/usr/bin/env bash
# The flood (zkbench flood) against a standalone zkd built from this tree, against Apache
# ZooKeeper, one after the other with the same zoo.cfg settings (maxClientCnxns=0, everything
# else as shipped; ZooKeeper's heap -Xmx1000m), and against the floor server. Prints the three
# reports.
#
#   scripts/bench/flood.sh [zkbench flood flags]   (default: -flooders 1000 -baseline 10s -duration 20s)
set -euo pipefail
. "$(dirname "$0")/lib.sh"
bench_setup flood
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
[ $# -gt 0 ] || set -- -flooders 1000 -baseline 10s -duration 20s
port=${FLOOD_PORT:-21840}
(cd "$root" && go build -o "$tmp/zkd" ./cmd/zkd)

mkdir -p "$tmp/zkd-data"
printf 'tickTime=2000\ndataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\nadmin.enableServer=false\n' \
	"$tmp/zkd-data" "$port" >"$tmp/zoo.cfg"
bench_start "$port" "$tmp/zkd" -config "$tmp/zoo.cfg"
echo "== zkd"
"$tmp/zkbench" flood -addr "127.0.0.1:$port" -pid "$pid" "$@"
bench_stop

mkdir -p "$tmp/zk"
bench_start "$port" "$tmp/zkbench" zookeeper -addr "127.0.0.1:$port" -dir "$tmp/zk" -cfg maxClientCnxns=0 -heap-mb 1000
# zkbench zookeeper runs the JVM as its child: sample the process that listens on the port.
jvm=$(ss -ltnpH "sport = :$port" | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2)
echo "== Apache ZooKeeper"
"$tmp/zkbench" flood -addr "127.0.0.1:$port" -pid "${jvm:-$pid}" "$@"
bench_stop

# The floor (zkbench floor): the least work a server of ZooKeeper's protocol and durability does
# on this machine, with no limits at all. What its probes get under the same flood is the most any
# server can keep here. It has no outbound bound, so it is spared the client that never reads.
mkdir -p "$tmp/floor"
bench_start_tcp "$port" "$tmp/zkbench" floor -port "$port" -dir "$tmp/floor"
echo "== floor (zkbench floor, the client that never reads left out)"
"$tmp/zkbench" flood -addr "127.0.0.1:$port" -pid "$pid" "$@" -nonreader-requests 0
