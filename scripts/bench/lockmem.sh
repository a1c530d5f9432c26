#!/usr/bin/env bash
# Server memory under N lock contenders (zkbench -workload lock: raw jute clients, a connection
# each; every contender reads the lock directory once), for a zkd binary and for Apache ZooKeeper
# (-Xmx1000m): the server's VmRSS before, at its peak (sampled every 200 ms) and once the
# contenders are done; the watch notifications the contenders received against their waits, and
# the server's own count of them (mntr's node_deleted_watch_count: connections notified per
# delete that triggered a watch).
#
#   scripts/bench/lockmem.sh BIN [N]        (N defaults to 6000; needs ulimit -n above N)
#
# LOCKMEM_ZKD_CFG adds zoo.cfg lines for zkd (e.g. 'zkd.maxTotalOutboundBytes=134217728');
# LOCKMEM_ZOOKEEPER=0 skips ZooKeeper.
set -euo pipefail
[ $# -ge 1 ] || { sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
bin=$1 n=${2:-6000}
. "$(dirname "$0")/lib.sh"
bench_setup lockmem
ulimit -n "$(ulimit -Hn)" 2>/dev/null || true
port=${LOCKMEM_PORT:-21832}
rss() { awk '/^VmRSS:/ {print int($2 / 1024)}' "/proc/$1/status"; }
# cpu prints a process's user+system CPU time in clock ticks.
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }
# written prints the bytes a process has written through write calls (sockets and files).
written() { awk '/^wchar:/ {print $2}' "/proc/$1/io"; }
# deleted_watches prints the count and sum of mntr's node_deleted_watch_count.
deleted_watches() {
	exec 3<>"/dev/tcp/127.0.0.1/$port" || return 0
	printf mntr >&3
	awk '/^zk_(cnt|sum)_node_deleted_watch_count/ {v[$1] = $2} END {printf "%d %d", v["zk_cnt_node_deleted_watch_count"], v["zk_sum_node_deleted_watch_count"]}' <&3
	exec 3<&-
}
measure() { # measure NAME PID
	local peak=0 sampler
	(
		p=0
		while kill -0 "$2" 2>/dev/null; do
			r=$(rss "$2") && [ "$r" -gt "$p" ] && p=$r && echo "$p" >"$tmp/peak"
			sleep 0.2
		done
	) &
	sampler=$!
	local before w0 w1 c0 c1 b0 b1 TIMEFORMAT
	before=$(rss "$2")
	w0=$(deleted_watches)
	c0=$(cpu "$2")
	b0=$(written "$2")
	TIMEFORMAT="$1: the contenders (zkbench) took %R s, %U s user and %S s system CPU"
	time "$tmp/zkbench" -addr "127.0.0.1:$port" -workload lock -clients "$n" -ops "$n" -duration 0 -session-timeout 120s | tail -n 4
	c1=$(cpu "$2")
	b1=$(written "$2")
	echo "$1: the server took $(awk -v t="$((c1 - c0))" -v hz="$(getconf CLK_TCK)" 'BEGIN {printf "%.2f", t / hz}') s CPU and wrote $(((b1 - b0) >> 20)) MB"
	w1=$(deleted_watches)
	set -- "$1" "$2" $w0 $w1
	echo "$1: mntr node_deleted_watch_count: $(($5 - $3)) deletes notified $(($6 - $4)) connections"
	peak=$(cat "$tmp/peak" 2>/dev/null || echo 0)
	echo "$1: $n contenders, VmRSS before $before MB, peak $peak MB, after $(rss "$2") MB"
	kill "$sampler" 2>/dev/null || true
	rm -f "$tmp/peak"
}

mkdir -p "$tmp/data"
printf 'dataDir=%s\nclientPort=%s\nclientPortAddress=127.0.0.1\nmaxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=ruok,mntr,srvr\n%s\n' "$tmp/data" "$port" "${LOCKMEM_ZKD_CFG:-}" >"$tmp/zoo.cfg"
bench_start "$port" "$bin" -config "$tmp/zoo.cfg"
measure "$bin" "$pid"
bench_stop
[ "${LOCKMEM_ZOOKEEPER:-1}" = 0 ] && exit 0

# ZooKeeper listens on the next port: the contenders' connections to the first one are still in
# TIME_WAIT, and a new server on that port saw some of its first handshakes cut (EOF).
port=$((port + 1))
mkdir -p "$tmp/zk"
bench_start "$port" "$tmp/zkbench" zookeeper -addr "127.0.0.1:$port" -dir "$tmp/zk" -cfg maxClientCnxns=0 -heap-mb 1000
jvm=$(ss -ltnpH "sport = :$port" | grep -o 'pid=[0-9]*' | head -n 1 | cut -d= -f2)
measure "Apache ZooKeeper" "${jvm:-$pid}"
