# Shared by the scripts in scripts/bench that start one zkd themselves (sourced, not run).
#
# bench_setup NAME: sets root (the repository) and tmp (a fresh directory, removed on exit,
# together with the server started by bench_start), and builds zkbench into $tmp/zkbench.
# bench_start PORT BIN ARGS...: starts BIN ARGS... in the background, logging to $tmp/log, sets
# pid, and waits until the server on 127.0.0.1:PORT answers ruok (bench_start_tcp: until it
# accepts a connection, for a server without four-letter words such as zkbench floor).
# bench_stop: stops the server bench_start started, by its pid.

bench_setup() {
	root=$(cd "$(dirname "$0")/../.." && pwd)
	tmp=$(mktemp -d "${TMPDIR:-/tmp}/zkd-$1.XXXXXX")
	pid=
	trap 'bench_stop; rm -rf "$tmp"' EXIT
	(cd "$root" && go build -o "$tmp/zkbench" ./cmd/zkbench)
}

bench_start() { bench_launch bench_answers_ruok "$@"; }
bench_start_tcp() { bench_launch bench_accepts "$@"; }

# bench_launch READY PORT BIN ARGS...: starts BIN ARGS... and waits until READY PORT succeeds.
bench_launch() {
	local ready=$1 port=$2
	shift 2
	"$@" >"$tmp/log" 2>&1 &
	pid=$!
	for _ in $(seq 100); do
		"$ready" "$port" && return 0
		sleep 0.1
	done
	echo "bench: the server on port $port did not come up ($ready); its log: $tmp/log" >&2
	return 1
}

bench_answers_ruok() { [ "$(bench_ruok "$1")" = imok ]; }
bench_accepts() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# bench_ruok PORT prints the server's answer to ruok (bash's /dev/tcp: no netcat needed).
bench_ruok() {
	(
		exec 3<>"/dev/tcp/127.0.0.1/$1" || exit 0
		printf ruok >&3
		IFS= read -r -t 2 answer <&3 || true
		printf '%s' "${answer:-}"
	) 2>/dev/null
}

bench_stop() {
	if [ -n "${pid:-}" ]; then
		kill "$pid" 2>/dev/null || true
		wait "$pid" 2>/dev/null || true
		pid=
	fi
}
