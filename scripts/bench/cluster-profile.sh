#!/usr/bin/env bash
# CPU profiles of a 3-node zkd cluster under one zkbench workload: the leader's and a follower's,
# through each server's admin pprof, sampled for 10 s in the middle of a 16 s run. Prints the
# load's result and each server's CPU per operation (user+system from /proc, whole run).
#
#   scripts/bench/cluster-profile.sh BIN WORKLOAD OUTDIR [zkbench flags...]
#   go tool pprof -top BIN OUTDIR/leader.pb        (and OUTDIR/follower.pb)
#
# Also prints each server's read and write system calls per operation (/proc/PID/io).
# Ports: CLUSTER_PROFILE_PORT (default 22400) and the 40 above it, on 127.0.0.1.
# CLUSTER_PROFILE_OFF=1 runs the load without profiling (for A/B rounds of two builds).
# CLUSTER_PROFILE_LEADER_ONLY=1 connects every client to the leader (as the replicated floor
# server's clients are), instead of spreading them over the three servers;
# CLUSTER_PROFILE_FOLLOWER_ONLY=1 connects them all to the profiled follower, so that every write
# is forwarded (as with a ZooKeeper client whose server is not the leader).
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
bin=$(realpath "$1") w=$2 out=$3
shift 3
mkdir -p "$out"
out=$(realpath "$out")
. "$(dirname "$0")/lib.sh"
bench_setup cluster-profile
base=${CLUSTER_PROFILE_PORT:-22400}
pids=()
stop_all() {
	for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
	for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
	pids=()
}
trap 'stop_all; rm -rf "$tmp"' EXIT
for i in 1 2 3; do
	d=$tmp/n$i
	mkdir -p "$d/data"
	echo "$i" >"$d/data/myid"
	{
		printf 'tickTime=2000\ninitLimit=10\nsyncLimit=5\ndataDir=%s/data\n' "$d"
		printf 'clientPortAddress=127.0.0.1\nclientPort=%d\nmaxClientCnxns=0\n4lw.commands.whitelist=*\n' $((base + i - 1))
		printf 'admin.enableServer=true\nadmin.serverAddress=127.0.0.1\nadmin.serverPort=%d\nadmin.enablePprof=true\n' $((base + 30 + i))
		for j in 1 2 3; do echo "server.$j=127.0.0.1:$((base + 10 + j)):$((base + 20 + j))"; done
	} >"$d/zoo.cfg"
	"$bin" -config "$d/zoo.cfg" >"$d/log" 2>&1 &
	pids+=($!)
done
# srvr PORT prints the server's mode (leader, follower) once it serves.
srvr() {
	(
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 0
		printf srvr >&3
		sed -n 's/^Mode: //p' <&3
	) 2>/dev/null
}
leader= follower=
for _ in $(seq 100); do
	leader= follower=
	for i in 1 2 3; do
		case $(srvr $((base + i - 1))) in
		leader) leader=$i ;;
		follower) follower=$i ;;
		esac
	done
	[ -n "$leader" ] && [ -n "$follower" ] && break
	sleep 0.2
done
[ -n "$leader" ] && [ -n "$follower" ] || { echo "cluster-profile: no leader and follower; logs in $tmp/n*/log" >&2; exit 1; }
ticks() { awk '{print $14 + $15}' "/proc/$1/stat"; }
syscalls() { awk '/^sysc[rw]:/ {printf "%s ", $2}' "/proc/$1/io"; }
declare -A cpu0 io0
for p in "${pids[@]}"; do cpu0[$p]=$(ticks "$p") io0[$p]=$(syscalls "$p"); done
addrs=127.0.0.1:$base,127.0.0.1:$((base + 1)),127.0.0.1:$((base + 2))
[ "${CLUSTER_PROFILE_LEADER_ONLY:-0}" = 1 ] && addrs=127.0.0.1:$((base + leader - 1))
[ "${CLUSTER_PROFILE_FOLLOWER_ONLY:-0}" = 1 ] && addrs=127.0.0.1:$((base + follower - 1))
"$tmp/zkbench" -addr "$addrs" -workload "$w" \
	-duration 16s -json "$@" >"$out/bench.json" &
load=$!
if [ "${CLUSTER_PROFILE_OFF:-0}" = 1 ]; then
	wait "$load"
else
	sleep 3
	curl -sf "http://127.0.0.1:$((base + 30 + leader))/debug/pprof/profile?seconds=10" >"$out/leader.pb" &
	c1=$!
	curl -sf "http://127.0.0.1:$((base + 30 + follower))/debug/pprof/profile?seconds=10" >"$out/follower.pb" &
	c2=$!
	wait "$load" "$c1" "$c2"
fi
ops=$(grep -o '"ops":[0-9]*' "$out/bench.json" | head -n 1 | cut -d: -f2)
hz=$(getconf CLK_TCK)
echo "$w: $(grep -o '"throughput":[0-9.]*' "$out/bench.json" | cut -d: -f2) ops/s; leader n$leader, follower n$follower"
for i in 1 2 3; do
	p=${pids[$((i - 1))]}
	echo "n$i: $(awk -v c=$(($(ticks "$p") - cpu0[$p])) -v o="$ops" -v hz="$hz" 'BEGIN {printf "%.1f", c / hz * 1e6 / o}') us of CPU per op;" \
		"$(echo "${io0[$p]} $(syscalls "$p")" | awk -v o="$ops" '{printf "%.2f reads, %.2f writes", ($3 - $1) / o, ($4 - $2) / o}') per op"
done
[ "${CLUSTER_PROFILE_OFF:-0}" = 1 ] || echo "profiles: $out/leader.pb $out/follower.pb"
