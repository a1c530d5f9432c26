#!/usr/bin/env bash
# Runs every Fuzz target of the module (its raft fork's included) for a bounded time each:
# scripts/fuzz.sh [FUZZTIME].
# go test accepts one -fuzz target per run, so targets are listed per package and run one by one.
#
# A run that writes a failing input (testdata/fuzz/<Target>/) fails at once. A run that fails
# without writing one is retried, up to twice: Go 1.26's fuzz coordinator can report its own
# -fuzztime deadline as "context deadline exceeded" when a loaded machine delays a worker
# (golang/go#75804, fixed in Go 1.27). Three such failures in a row still fail the target.
set -euo pipefail
fuzztime=${1:-20s}
cd "$(dirname "$0")/.."
status=0
count=0
for pkg in $(go list ./...); do
	targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
	[ -n "$targets" ] || continue
	dir=$(go list -f '{{.Dir}}' "$pkg")
	for t in $targets; do
		count=$((count + 1))
		corpus="$dir/testdata/fuzz/$t"
		ok=0
		for attempt in 1 2 3; do
			before=$(ls "$corpus" 2>/dev/null | sort || true)
			echo "== fuzz $pkg $t ($fuzztime, attempt $attempt)"
			if go test -run='^$' -fuzz="^${t}\$" -fuzztime="$fuzztime" "$pkg"; then
				ok=1
				break
			fi
			after=$(ls "$corpus" 2>/dev/null | sort || true)
			if [ "$before" != "$after" ]; then
				echo "FAIL: fuzz $pkg $t wrote a failing input:"
				comm -13 <(echo "$before") <(echo "$after") | sed "s|^|    $corpus/|"
				break
			fi
			echo "fuzz $pkg $t failed without a failing input (the Go 1.26 fuzztime race?); retrying"
		done
		if [ "$ok" -ne 1 ]; then
			echo "FAIL: fuzz $pkg $t"
			status=1
		fi
	done
done
echo "fuzz: $count targets run"
exit $status
