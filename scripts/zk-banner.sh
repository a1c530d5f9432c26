#!/bin/sh
# Run by `make test`: says loudly when what the oracle and client checks need is missing, so that
# nobody takes their SKIPs for passes. The oracle is real Apache ZooKeeper: the same files as
# internal/testkit/apachezk's Installed (Debian's zookeeper package and java). The client smoke tests
# (server/clients_test.go) drive kazoo (python3-kazoo) and the C client cli_mt (zookeeper-bin).
# /metrics is linted by promtool (Debian's prometheus package) in server's TestMetricsPassPromtool.
install="apt-get install zookeeper zookeeper-bin python3-kazoo prometheus"
line="##############################################################################################"
missing=""
for f in /usr/share/java/zookeeper.jar /usr/share/java/slf4j-log4j12.jar /usr/share/java/log4j-1.2.jar; do
	[ -f "$f" ] || missing="$missing $f"
done
command -v java >/dev/null 2>&1 || missing="$missing java"
clients=""
[ -x /usr/lib/zookeeper/bin/cli_mt ] || clients="$clients zookeeper-bin"
# As the test does: Debian's python3 first, then whichever python3 is on PATH.
/usr/bin/python3 -c "import kazoo" >/dev/null 2>&1 || python3 -c "import kazoo" >/dev/null 2>&1 ||
	clients="$clients python3-kazoo"
promtool=""
command -v promtool >/dev/null 2>&1 || promtool="prometheus"
[ -z "$missing$clients$promtool" ] && exit 0
{
	echo "$line"
	if [ -n "$missing" ]; then
		echo "## ZooKeeper is not installed: the oracle checks against real Apache ZooKeeper will SKIP."
		echo "## Missing:$missing"
	fi
	if [ -n "$clients" ]; then
		echo "## The client smoke tests that need$clients will SKIP."
	fi
	if [ -n "$promtool" ]; then
		echo "## promtool is missing: /metrics will not be linted (TestMetricsPassPromtool will SKIP)."
	fi
	echo "## Install: $install"
	echo "$line"
} >&2
