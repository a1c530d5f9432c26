#!/bin/sh
# Runs a three-server zkd cluster on loopback from the repository root:
#   ./examples/cluster/run.sh        (or: make cluster)
# Clients connect to 127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183; admin HTTP on 8081-8083.
# Ctrl-C stops all three. Data stays in examples/cluster/data (delete it to start afresh).
set -eu
cd "$(dirname "$0")/../.."
mkdir -p bin
go build -buildvcs=auto -o bin/zkd ./cmd/zkd
pids=""
stop() {
	for p in $pids; do kill "$p" 2>/dev/null || true; done
	wait
	exit 0
}
trap stop INT TERM
for i in 1 2 3; do
	mkdir -p "examples/cluster/data/$i"
	echo "$i" > "examples/cluster/data/$i/myid"
	./bin/zkd -config "examples/cluster/zoo$i.cfg" > "examples/cluster/data/$i/zkd.log" 2>&1 &
	pids="$pids $!"
done
echo "zkd cluster: clients on 127.0.0.1:2181,127.0.0.1:2182,127.0.0.1:2183 (Ctrl-C stops it)"
echo "logs: examples/cluster/data/{1,2,3}/zkd.log"
wait
