"""kazoo driven over stdin for the client matrix: one command a line in, one answer a line out,
"ok [detail]" or "err <ExceptionClass>". See clientmatrix/doc.go for the commands."""
import sys
import threading
import time

import kazoo.handlers.threading

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

zk = None
last_event = "none"


def listener(state):
    global last_event
    last_event = str(state)


def handle(a):
    global zk
    cmd = a[0]
    if cmd == "connect":
        zk = KazooClient(hosts=a[1], timeout=int(a[2]) / 1000.0, read_only=a[3] == "1",
                         connection_retry={"max_tries": -1, "max_delay": 1})
        zk.add_listener(listener)
        zk.start(timeout=15)
        sid, pw = zk.client_id
        return "ok %x %s" % (sid, pw.hex())
    if cmd == "create":
        seq = a[3] == "s"
        eph = a[3] == "e"
        return "ok " + zk.create(a[1], b"\0" * int(a[2]), sequence=seq, ephemeral=eph)
    if cmd == "get":
        return "ok %d" % len(zk.get(a[1])[0])
    if cmd == "children":
        return "ok %d" % len(zk.get_children(a[1]))
    if cmd == "addauth":
        zk.add_auth(a[1], a[2])
        return "ok"
    if cmd == "reconfig":
        zk.reconfig(joining=None, leaving="99", new_members=None)
        return "ok"
    if cmd == "probe":
        fired = threading.Event()
        zk.exists(a[1], watch=lambda ev: fired.set())
        zk.create(a[1], b"", ephemeral=True)
        if not fired.wait(10):
            return "err WatchNotDelivered"
        zk.delete(a[1])
        return "ok"
    if cmd == "burst":
        n = int(a[2])
        results = [zk.create_async("%s/n%d-" % (a[1], i), b"", sequence=True) for i in range(n)]
        ok, errs = 0, set()
        deadline = time.monotonic() + 15
        for r in results:
            try:
                r.get(timeout=max(0.01, deadline - time.monotonic()))
                ok += 1
            except kazoo.handlers.threading.KazooTimeoutError:
                return "err BurstUnanswered"
            except Exception as e:  # noqa: BLE001 - the class name is the answer
                errs.add(type(e).__name__)
        return "ok %d %s" % (ok, ",".join(sorted(errs)))
    if cmd == "state":
        alive = zk._connection._connection_routine is not None and zk._connection._connection_routine.is_alive()
        # kazoo ends its connection thread itself once the session is lost; a dead thread with the
        # session not lost is a crash (such as an error code kazoo does not know).
        dead = not alive and zk.state != KazooState.LOST
        return "ok %s %s%s" % (zk.state, last_event, " iothread=dead" if dead else "")
    if cmd == "close":
        zk.stop()
        zk.close()
        return "ok"
    return "err UnknownCommand"


def main():
    print("ready", flush=True)
    for line in sys.stdin:
        a = line.split()
        if not a:
            continue
        try:
            out = handle(a)
        except Exception as e:  # noqa: BLE001 - the class name is the answer
            out = "err " + type(e).__name__
        print(out, flush=True)


main()
