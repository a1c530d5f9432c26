"""A kazoo client that rides through a move from ZooKeeper to zkd.

python3 cutover_client.py host:port

It opens a session, creates the ephemeral /kazoo-eph and watches /watched, prints
"READY <session id in hex>", then waits for a line on stdin (sent once the move is done and
/watched has changed), and prints "OK" if the same session is connected again, still owns its
ephemeral and saw its watch fire; otherwise "FAIL <why>".
"""
import sys
import threading
import time

from kazoo.client import KazooClient, KazooState

zk = KazooClient(hosts=sys.argv[1], timeout=30)
lost = threading.Event()
# The move drops the connection to ZooKeeper; reconnected is set once the client is connected
# again after that (its state alone may still say CONNECTED before it noticed the drop).
dropped = threading.Event()
reconnected = threading.Event()


def listener(state):
    if state == KazooState.LOST:
        lost.set()
    if state == KazooState.SUSPENDED:
        dropped.set()
    if state == KazooState.CONNECTED and dropped.is_set():
        reconnected.set()


zk.add_listener(listener)
zk.start(timeout=30)
sid = zk.client_id[0]
zk.create("/kazoo-eph", b"", ephemeral=True)
fired = threading.Event()


@zk.DataWatch("/watched")
def watch(data, stat):
    if data == b"v1":
        fired.set()


print("READY %x" % sid, flush=True)
sys.stdin.readline()


def check():
    reconnected.wait(60)
    if lost.is_set():
        return "FAIL the session was lost"
    if not reconnected.is_set():
        return "FAIL not connected again: %s" % zk.state
    if zk.client_id[0] != sid:
        return "FAIL a new session %x" % zk.client_id[0]
    stat = zk.exists("/kazoo-eph")
    if stat is None or stat.ephemeralOwner != sid:
        return "FAIL the ephemeral is gone: %s" % (stat,)
    if not fired.wait(30):
        return "FAIL the watch never fired"
    return "OK"


print(check(), flush=True)
zk.stop()
