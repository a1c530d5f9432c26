#!/usr/bin/env bash
# A CPU or allocation profile of a standalone zkd under one zkbench workload, through the admin
# server's pprof (zoo.cfg admin.enablePprof).
#
#   scripts/bench/profile.sh BIN WORKLOAD OUT [cpu|allocs] [zkbench flags...]
#   go tool pprof -top BIN OUT
#
# cpu (the default) samples 10 s in the middle of a 16 s run; allocs reads the cumulative
# allocation profile at the end of it (go tool pprof -sample_index=alloc_space).
set -euo pipefail
[ $# -ge 3 ] || { sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//' >&2; exit 2; }
bin=$1 w=$2 out=$3
kind=${4:-cpu}
shift $(($# >= 4 ? 4 : 3))
. "$(dirname "$0")/lib.sh"
bench_setup profile
port=${PROFILE_PORT:-21810} admin=${PROFILE_ADMIN_PORT:-28080}
mkdir -p "$tmp/data"
cat >"$tmp/zoo.cfg" <<CFG
dataDir=$tmp/data
clientPort=$port
clientPortAddress=127.0.0.1
admin.enableServer=true
admin.serverPort=$admin
admin.enablePprof=true
maxClientCnxns=0
CFG
bench_start "$port" "$bin" -config "$tmp/zoo.cfg"
"$tmp/zkbench" -addr "127.0.0.1:$port" -workload "$w" -duration 16s "$@" >"$tmp/bench.out" 2>&1 &
load=$!
case $kind in
cpu)
	sleep 4
	curl -sf "http://127.0.0.1:$admin/debug/pprof/profile?seconds=10" >"$out"
	wait "$load"
	;;
allocs)
	wait "$load"
	curl -sf "http://127.0.0.1:$admin/debug/pprof/allocs" >"$out"
	;;
*) echo "profile.sh: kind must be cpu or allocs" >&2; exit 2 ;;
esac
tail -n 3 "$tmp/bench.out"
