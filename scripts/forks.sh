#!/usr/bin/env bash
# zkd's forks of hashicorp/raft and hashicorp/raft-wal are packages of zkd's own module, under
# internal/third_party/ (each ZKD.md records what differs and why). This script compares them
# with the upstream release they were made from, which the Go module cache holds:
#
#   scripts/forks.sh diff [FORK...]   the fork's source against upstream's, as a unified diff
#                                     (zkd's import paths put back to upstream's), for a rebase
#   scripts/forks.sh test [FORK...]   upstream's own test suite, and the fork's zkd_*_test.go,
#                                     run against the fork (TESTFLAGS adds go test flags)
#
# FORK is raft or raft-wal; none means both. For a test run the fork's files are laid over a
# copy of the upstream module (its go.mod and go.sum, its tests and test data) in a temporary
# directory, so the tests build exactly as upstream's own CI builds them.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
zkd=github.com/zkd-io/zkd/internal/third_party

# skips FORK prints the upstream tests not run on FORK, as a go test -skip pattern. Each is
# left out for a reason that is not the fork's:
#   TestFileSS_BadPerm: expects a directory without permissions to be unusable; CI runs as root.
#   TestRaft_HasExistingState, TestRaft_ProtocolVersion_Upgrade_1_2 and _2_3: fail on upstream
#     v1.7.3 itself on the project's machines (all three in one run of its suite; the first two
#     3 of 5 runs with -count=5), their peer check racing the cluster's configuration change.
#   raft-wal's TestFrameCodecFuzz: slices a 65528-byte value to a random length up to 65535 and
#     panics when the draw is above it, about one run in ten on the unmodified release too.
skips() {
	case $1 in
	raft) echo '^(TestFileSS_BadPerm|TestRaft_HasExistingState|TestRaft_ProtocolVersion_Upgrade_1_2|TestRaft_ProtocolVersion_Upgrade_2_3)$' ;;
	raft-wal) echo '^TestFrameCodecFuzz$' ;;
	esac
}

upstream_of() {
	case $1 in
	raft) echo github.com/hashicorp/raft@v1.7.3 ;;
	raft-wal) echo github.com/hashicorp/raft-wal@v0.4.2 ;;
	*) echo "forks.sh: unknown fork $1 (raft, raft-wal)" >&2; exit 2 ;;
	esac
}

# upstream_dir MODULE@VERSION prints the module's directory in the module cache, downloading it.
upstream_dir() {
	go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",$/\1/p'
}

# packages FORK prints the fork's package directories, relative to the fork's root.
packages() {
	(cd "internal/third_party/$1" && find . -name '*.go' -not -name '*_test.go' -printf '%h\n' | sort -u)
}

# unfork FILE... rewrites zkd's import paths of the forks back to upstream's, in place.
unfork() {
	sed -i -e "s#\"$zkd/raft-wal#\"github.com/hashicorp/raft-wal#g" \
		-e "s#^\([[:space:]]*\)wal \"github.com/hashicorp/raft-wal\"#\1\"github.com/hashicorp/raft-wal\"#" \
		-e "s#\"$zkd/raft\"#\"github.com/hashicorp/raft\"#g" "$@"
}

# copy_fork DIR FORK [tests] copies FORK's source files, and with "tests" its zkd_*_test.go, into
# DIR, with upstream's import paths.
copy_fork() {
	local dst=$1 fork=$2 tests=${3:-}
	local src="internal/third_party/$fork"
	for d in $(packages "$fork"); do
		mkdir -p "$dst/$d"
		for f in "$src/$d"/*.go; do
			case $f in *_test.go) [ "$tests" = tests ] && [[ $(basename "$f") == zkd_* ]] || continue ;; esac
			cp "$f" "$dst/$d/"
		done
	done
	unfork $(find "$dst" -name '*.go')
}

diff_fork() {
	local fork=$1 up tmp
	up=$(upstream_dir "$(upstream_of "$fork")")
	tmp=$(mktemp -d)
	trap 'rm -rf "$tmp"' RETURN
	mkdir -p "$tmp/upstream" "$tmp/fork"
	for d in $(packages "$fork"); do
		mkdir -p "$tmp/upstream/$d"
		find "$up/$d" -maxdepth 1 -name '*.go' -not -name '*_test.go' -exec cp {} "$tmp/upstream/$d/" \;
	done
	copy_fork "$tmp/fork" "$fork"
	echo "# $fork: internal/third_party/$fork against $(upstream_of "$fork") (see its ZKD.md)"
	(cd "$tmp" && diff -ruN upstream fork | sed -E 's/^(---|\+\+\+) ([^\t]+)\t.*/\1 \2/') || true
}

test_fork() {
	local fork=$1 up tmp pkgs=()
	up=$(upstream_dir "$(upstream_of "$fork")")
	tmp=$(mktemp -d)
	trap 'chmod -R u+w "$tmp"; rm -rf "$tmp"' RETURN
	cp -r "$up/." "$tmp/"
	chmod -R u+w "$tmp"
	for d in $(packages "$fork"); do
		find "$tmp/$d" -maxdepth 1 -name '*.go' -not -name '*_test.go' -delete
		pkgs+=("$d")
	done
	copy_fork "$tmp" "$fork" tests
	# Where the fork changed an interface upstream's test doubles implement, the fork carries the
	# change to those doubles as a patch (listed in its ZKD.md).
	if [ -f "internal/third_party/$fork/upstream_tests.patch" ]; then
		patch -s -d "$tmp" -p1 <"internal/third_party/$fork/upstream_tests.patch"
	fi
	echo "== upstream's tests of $(upstream_of "$fork") on zkd's fork: ${pkgs[*]}"
	local log="$tmp/test.log" failed
	if (cd "$tmp" && GOWORK=off GOFLAGS="-mod=mod ${GOFLAGS:-}" go test -skip "$(skips "$fork")" ${TESTFLAGS:-} "${pkgs[@]}") 2>&1 | tee "$log"; then
		return 0
	fi
	# Upstream's suite runs clusters on real timers; a test that fails once is run again, alone,
	# and passes only if it passes then (the failures stay in the output above).
	failed=$(sed -n 's/^--- FAIL: \([^ /]*\) .*/\1/p' "$log" | sort -u | paste -sd'|')
	[ -n "$failed" ] || return 1
	echo "== again, alone: $failed"
	(cd "$tmp" && GOWORK=off GOFLAGS="-mod=mod ${GOFLAGS:-}" go test -count=1 -run "^($failed)\$" ${TESTFLAGS:-} "${pkgs[@]}")
}

cmd=${1:-}
shift || true
forks=("$@")
[ ${#forks[@]} -gt 0 ] || forks=(raft raft-wal)
case $cmd in
diff) for f in "${forks[@]}"; do diff_fork "$f"; done ;;
test) for f in "${forks[@]}"; do test_fork "$f"; done ;;
*) sed -n '2,14p' "$0"; exit 2 ;;
esac
