"""Holds kazoo sessions open and reports every time one of them lost its connection.

python3 long_lived.py HOSTS SECONDS TIMEOUT_MS [TLS_HOSTS CA CERT KEY]

Opens an idle session (only kazoo's own pings) and a busy one (exists, create, set and delete
every 100 ms) on HOSTS, and the same two over TLS on TLS_HOSTS when given. For SECONDS it keeps
them, then prints one line per session:

    result NAME connects=N disconnects=N sessions=N errors=N ops=N

connects counts CONNECTED states (1 for a connection that never dropped), disconnects counts
SUSPENDED and LOST, sessions the session ids seen, errors the operations that failed. Every state
change and error is also printed as it happens, with seconds since the start.
"""
import os
import sys
import threading
import time

from kazoo.client import KazooClient, KazooState

start = time.monotonic()
lock = threading.Lock()


def say(line):
    with lock:
        print("%7.1f %s" % (time.monotonic() - start, line), flush=True)


class Held:
    def __init__(self, name, hosts, timeout_ms, busy, tls):
        self.name, self.busy = name, busy
        self.connects = self.disconnects = self.errors = self.ops = 0
        self.sessions = set()
        self.stopping = False
        kw = {}
        if tls:
            ca, cert, key = tls
            kw = dict(use_ssl=True, ca=ca, certfile=cert, keyfile=key, verify_certs=True)
        self.zk = KazooClient(hosts=hosts, timeout=timeout_ms / 1000.0, **kw)
        self.zk.add_listener(self.changed)

    def changed(self, state):
        say("%s state %s" % (self.name, state))
        if self.stopping:
            return  # stop() closes the session: LOST
        if state == KazooState.CONNECTED:
            self.connects += 1
        else:
            self.disconnects += 1

    def run(self, until):
        self.zk.start(timeout=60)
        self.sessions.add(self.zk.client_id[0])
        path = "/long-lived-kazoo-%d-%s" % (os.getpid(), self.name)
        while time.monotonic() < until:
            if self.busy:
                try:
                    self.zk.exists("/")
                    self.zk.create(path, b"v")
                    self.zk.set(path, b"w")
                    self.zk.delete(path)
                    self.ops += 4
                except Exception as e:  # any failure is what the test looks for
                    self.errors += 1
                    say("%s error %r" % (self.name, e))
                    try:
                        self.zk.delete(path)
                    except Exception:
                        pass
                time.sleep(0.1)
            else:
                time.sleep(0.5)
            if self.zk.client_id:
                self.sessions.add(self.zk.client_id[0])
        self.stopping = True
        self.zk.stop()
        self.zk.close()

    def result(self):
        return "result %s connects=%d disconnects=%d sessions=%d errors=%d ops=%d" % (
            self.name, self.connects, self.disconnects, len(self.sessions), self.errors, self.ops)


def main():
    hosts, seconds, timeout_ms = sys.argv[1], float(sys.argv[2]), int(sys.argv[3])
    held = [Held("idle", hosts, timeout_ms, False, None), Held("busy", hosts, timeout_ms, True, None)]
    if len(sys.argv) > 4:
        tls_hosts, tls = sys.argv[4], sys.argv[5:8]
        held += [Held("idle-tls", tls_hosts, timeout_ms, False, tls), Held("busy-tls", tls_hosts, timeout_ms, True, tls)]
    until = time.monotonic() + seconds
    threads = [threading.Thread(target=h.run, args=(until,)) for h in held]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for h in held:
        print(h.result(), flush=True)


main()
