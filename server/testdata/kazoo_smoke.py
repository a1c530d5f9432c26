"""Smoke test of kazoo against a zkd server: python3 kazoo_smoke.py host:port[,host:port...]"""
import sys
import threading

from kazoo.client import KazooClient
from kazoo.exceptions import NodeExistsError, BadVersionError
from kazoo.recipe.lock import Lock

hosts = sys.argv[1]
zk = KazooClient(hosts=hosts, timeout=10)
zk.start(timeout=15)

zk.ensure_path("/kazoo/a/b")
zk.create("/kazoo/data", b"v1")
try:
    zk.create("/kazoo/data", b"again")
    raise SystemExit("create of an existing node succeeded")
except NodeExistsError:
    pass

fired = threading.Event()
seen = []


@zk.DataWatch("/kazoo/data")
def watch(data, stat):
    seen.append(data)
    if data == b"v2":
        fired.set()


zk.set("/kazoo/data", b"v2")
if not fired.wait(10):
    raise SystemExit("DataWatch did not fire: %r" % seen)

try:
    zk.set("/kazoo/data", b"x", version=0)
    raise SystemExit("set with a stale version succeeded")
except BadVersionError:
    pass

seq = zk.create("/kazoo/s-", b"", ephemeral=True, sequence=True)
assert seq.startswith("/kazoo/s-") and len(seq) == len("/kazoo/s-") + 10, seq

tx = zk.transaction()
tx.create("/kazoo/t1", b"1")
tx.check("/kazoo/data", 1)
tx.set_data("/kazoo/data", b"v3")
results = tx.commit()
assert results[0] == "/kazoo/t1", results

lock = Lock(zk, "/kazoo/lock")
with lock:
    assert len(zk.get_children("/kazoo/lock")) == 1

children = sorted(zk.get_children("/kazoo"))
assert "data" in children and "t1" in children, children
zk.delete("/kazoo", recursive=True)
assert zk.exists("/kazoo") is None
zk.stop()
zk.close()
print("kazoo ok")
