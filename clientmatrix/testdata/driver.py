"""kazoo driven over stdin for the client matrix: one command a line in, one answer a line out,
"ok [detail]" or "err <ExceptionClass>". See clientmatrix/doc.go for the commands."""
import sys
import threading
import time

from kazoo.client import KazooClient
from kazoo.protocol.states import KazooState

zk = None
# How long burst waits for its results (the matrix allows it a few seconds more).
BURST_WAIT = 8
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
        zk.start(timeout=8)
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
        # Wait for every result up to one deadline, then classify without waiting further:
        # answered, failed (by exception name), not completed yet (kazoo holds requests it has
        # not sent until it reconnects), and not issued: while kazoo is disconnected its
        # connection thread stops reading the socket that wakes it, and once that is full
        # create_async itself blocks until a reconnection. The calls are made on a thread of
        # their own so that the driver still answers.
        n = int(a[2])
        results = []

        def issue():
            for i in range(n):
                results.append(zk.create_async("%s/n%d-" % (a[1], i), b"", sequence=True))

        deadline = time.monotonic() + BURST_WAIT
        issuer = threading.Thread(target=issue, daemon=True)
        issuer.start()
        issuer.join(BURST_WAIT)
        for r in list(results):
            left = deadline - time.monotonic()
            if left <= 0:
                break
            r.wait(left)
        issued = list(results)
        ok, failed, pending, errs = 0, 0, 0, set()
        for r in issued:
            if not r.ready():
                pending += 1
            elif r.successful():
                ok += 1
            else:
                failed += 1
                errs.add(type(r.exception).__name__)
        return "ok %d %d %d %s %d" % (ok, failed, pending, ",".join(sorted(errs)) or "-", n - len(issued))
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
