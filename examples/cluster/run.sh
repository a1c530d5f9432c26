#!/bin/sh
# Runs a three-server zkd cluster on loopback from the repository root:
#   ./examples/cluster/run.sh        (or: make cluster) servers 1-3
#   ./examples/cluster/run.sh 4      server 4, a member-to-be for the reconfig walkthrough (README.md)
# Clients connect to 127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183 (2184); admin HTTP on 8081-8084.
# Ctrl-C stops what it started. Data stays in examples/cluster/data (delete it to start afresh);
# each server's previous log is kept as zkd.log.1.
set -eu
cd "$(dirname "$0")/../.."
mkdir -p bin
go build -buildvcs=auto -o bin/zkd ./cmd/zkd
ids="1 2 3"
join=""
if [ "${1:-}" = 4 ]; then
	ids=4
	join=-join
fi
pids=""
stop() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	wait
	exit "${1:-0}"
}
trap 'stop 0' INT TERM
for i in $ids; do
	d="examples/cluster/data/$i"
	mkdir -p "$d"
	echo "$i" > "$d/myid"
	[ -f "$d/zkd.log" ] && mv "$d/zkd.log" "$d/zkd.log.1"
	./bin/zkd -config "examples/cluster/zoo$i.cfg" $join > "$d/zkd.log" 2>&1 &
	pids="$pids $!"
done
# Say at once which server failed to start, and why.
sleep 2
failed=0
set -- $pids
for i in $ids; do
	if ! kill -0 "$1" 2>/dev/null; then
		echo "zkd server $i failed to start; the end of examples/cluster/data/$i/zkd.log:" >&2
		tail -n 5 "examples/cluster/data/$i/zkd.log" >&2
		failed=1
	fi
	shift
done
if [ "$failed" = 1 ]; then
	stop 1
fi
if [ -n "$join" ]; then
	echo "zkd server 4 waits to be added: see the reconfig walkthrough in examples/cluster/README.md (Ctrl-C stops it)"
else
	echo "zkd cluster: clients on 127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183 (Ctrl-C stops it)"
fi
echo "logs: examples/cluster/data/{$(echo $ids | tr ' ' ',')}/zkd.log"
wait
