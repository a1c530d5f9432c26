#!/usr/bin/env bash
# Uses zkd the way a user outside this repository does, from a temporary directory:
#
#  1. a module of its own that requires github.com/zkd-io/zkd (replaced by this checkout, and
#     nothing else replaced) builds and runs the README's two embedding examples and
#     scripts/testdata/outside/embed_test.go (server.Start, zkdtest.Start, zkdtest.StartCluster,
#     recipes);
#  2. this checkout, packed as a module zip in a file-based module proxy, installs with the
#     README's `go install github.com/zkd-io/zkd/cmd/zkd@latest` and at its pseudo-version, and
#     the binary serves a client.
#
# Needs the module proxy for zkd's dependencies. CI runs it (make test-outside).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
mod=github.com/zkd-io/zkd
tmp=$(mktemp -d)
pid=""
cleanup() {
	if [ -n "$pid" ]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
	chmod -R u+w "$tmp" 2>/dev/null || true
	rm -rf "$tmp"
}
trap cleanup EXIT
export GOWORK=off GOFLAGS=-buildvcs=false

echo "== an outside module embeds zkd"
app="$tmp/app"
mkdir -p "$app/cmd/hello" "$app/readme"
cp scripts/testdata/outside/embed_test.go "$app/"
# The README's Embedding section: the program, then the test.
python3 - "$root/README.md" "$app" <<'EOF'
import re, sys
readme, app = open(sys.argv[1]).read(), sys.argv[2]
m = re.search(r"\n## Embedding[^\n]*\n", readme)
if not m:
    sys.exit("README has no Embedding section")
sec = readme[m.start():]
sec = sec[:sec.index("\n## ", 1)]
blocks = re.findall(r"```go\n(.*?)```", sec, re.S)
if len(blocks) != 2 or not blocks[0].startswith("package main") or "func Test" not in blocks[1]:
    sys.exit("README's Embedding section must hold a program and a test, in that order")
open(app + "/cmd/hello/main.go", "w").write(blocks[0])
open(app + "/readme/app_test.go", "w").write(blocks[1])
EOF
cat >"$app/go.mod" <<EOF
module example.com/outside

go 1.26

require $mod v0.0.0-00010101000000-000000000000

replace $mod => $root
EOF
(
	cd "$app"
	go mod tidy
	if grep "^replace" go.mod | grep -qv "^replace $mod "; then echo "outside: more than zkd replaced"; exit 1; fi
	go vet ./...
	go test -count=1 ./...
	out=$(go run ./cmd/hello)
	[ "$out" = "/hello <nil>" ] || { echo "outside: the README's program printed: $out"; exit 1; }
	echo "README program: $out"
)

echo "== go install from a module proxy"
commit=$(git rev-parse HEAD)
when=$(TZ=UTC git show -s --date=format-local:%Y%m%d%H%M%S --format=%cd HEAD)
version="v0.0.0-$when-${commit:0:12}"
proxy="$tmp/proxy"
vdir="$proxy/$mod/@v"
mkdir -p "$vdir"
cp go.mod "$vdir/$version.mod"
printf '{"Version":"%s","Time":"%s"}\n' "$version" "$(TZ=UTC git show -s --date=format-local:%Y-%m-%dT%H:%M:%SZ --format=%cd HEAD)" >"$vdir/$version.info"
echo "$version" >"$vdir/list"
cp "$vdir/$version.info" "$proxy/$mod/@latest"
# The module zip holds the checkout's files (tracked, and untracked ones not ignored) under
# module@version/, as a proxy serves them.
git ls-files -co --exclude-standard -z | python3 -c '
import sys, zipfile, os
prefix, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for f in sys.stdin.buffer.read().split(b"\0"):
        f = f.decode()
        if f and os.path.isfile(f) and not os.path.islink(f):
            z.write(f, prefix + "/" + f)
' "$mod@$version" "$vdir/$version.zip"
upstream=$(go env GOPROXY)
for v in latest "$version"; do
	bin="$tmp/bin-$v"
	(cd "$tmp" && GOBIN="$bin" GOPROXY="file://$proxy,$upstream" GONOSUMDB=$mod GOFLAGS=-mod=mod \
		go install "$mod/cmd/zkd@$v")
	"$bin/zkd" version | head -2
done

# The installed binary serves: standalone, in a data directory of its own, on a free port.
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$tmp/bin-latest/zkd" -data "$tmp/data" -addr "127.0.0.1:$port" -admin off >"$tmp/zkd.log" 2>&1 &
pid=$!
for _ in $(seq 100); do
	if [ "$(python3 - "$port" <<'EOF'
import socket, sys
try:
    s = socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=1)
    s.sendall(b"ruok"); print(s.recv(4).decode())
except OSError:
    print("")
EOF
)" = imok ]; then
		echo "installed zkd answers ruok on 127.0.0.1:$port"
		exit 0
	fi
	sleep 0.1
done
echo "outside: the installed zkd did not serve:"
cat "$tmp/zkd.log"
exit 1
