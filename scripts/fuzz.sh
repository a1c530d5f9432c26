#!/usr/bin/env bash
# Runs every Fuzz target of the module for a bounded time each: scripts/fuzz.sh [FUZZTIME].
# go test accepts one -fuzz target per run, so targets are listed per package and run one by one.
set -euo pipefail
fuzztime=${1:-20s}
cd "$(dirname "$0")/.."
status=0
count=0
for pkg in $(go list ./...); do
	targets=$(go test -list '^Fuzz' "$pkg" 2>/dev/null | grep '^Fuzz' || true)
	for t in $targets; do
		count=$((count + 1))
		echo "== fuzz $pkg $t ($fuzztime)"
		if ! go test -run='^$' -fuzz="^${t}\$" -fuzztime="$fuzztime" "$pkg"; then
			echo "FAIL: fuzz $pkg $t"
			status=1
		fi
	done
done
echo "fuzz: $count targets run"
exit $status
