"""A long-lived kazoo client creating znodes and reading them back, beside kazoo clients that churn.

python3 mixed_clients.py HOLD_HOSTS CHURN_HOSTS EXPIRE_HOSTS SECONDS HOLD_TIMEOUT_MS CHURN_TIMEOUT_MS VICTIM_TIMEOUT_MS PREFIX

The kazoo twin of MixedClients.java, with the same arguments and the same output. The long-lived
client connects to HOLD_HOSTS (the servers themselves) and creates PREFIX/kazoo/n-00000000, ...,
reading each back. The churners connect to CHURN_HOSTS, proxies the test controls: sessions
opened and closed, Lock, Semaphore (two leases) and Election. Victims connect to EXPIRE_HOSTS:
each opens a session, creates an ephemeral znode, prints "expire-ready PATH" and waits for the
test to expire the session, then prints "expired PATH". After SECONDS it prints

    result busy connects=N disconnects=N sessions=N errors=N ops=N
    created busy PARENT N
    uncertain busy PATH
    churn kazoo sessions=N locks=N elections=N semaphores=N expiries=N lost=N errors=N

connects counts CONNECTED states, disconnects SUSPENDED and LOST, errors the long-lived client's
failed operations. A churner's failure is "lost" when it is the connection loss or session expiry
a cut brings, and an error otherwise; an error is also two holders of the lock or the leadership,
or three of the semaphore's two leases, at once.
"""
import faulthandler
import sys
import threading
import time

from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (ConnectionClosedError, ConnectionLoss, LockTimeout,
                              OperationTimeoutError, SessionExpiredError)
from kazoo.handlers.threading import KazooTimeoutError

start = time.monotonic()
out = threading.Lock()


def say(line):
    with out:
        print("%7.1f %s" % (time.monotonic() - start, line), flush=True)


hold_hosts, churn_hosts, expire_hosts = sys.argv[1], sys.argv[2], sys.argv[3]
until = time.monotonic() + float(sys.argv[4])
hold_timeout, churn_timeout, victim_timeout = (int(v) / 1000.0 for v in sys.argv[5:8])
prefix = sys.argv[8]


def running():
    return time.monotonic() < until


def pause(seconds):
    # Pacing on the real clock: the clients run for a span of real time at a modest rate, so a
    # loaded 2-core machine keeps up; there is no event to pace on.
    time.sleep(seconds)


class Held:
    def __init__(self):
        self.connects = self.disconnects = self.errors = self.ops = self.created = 0
        self.sessions = set()
        self.uncertain = []
        self.stopping = False
        self.zk = KazooClient(hosts=hold_hosts, timeout=hold_timeout)
        self.zk.add_listener(self.changed)

    def changed(self, state):
        say("busy state %s" % state)
        if self.stopping:
            return  # stop() closes the session: LOST
        if state == KazooState.CONNECTED:
            self.connects += 1
        else:
            self.disconnects += 1

    def run(self):
        self.zk.start(timeout=60)
        parent = prefix + "/kazoo"
        try:
            self.zk.ensure_path(parent)
        except Exception as e:
            self.errors += 1
            say("busy error creating %s: %r" % (parent, e))
        while running():
            if self.zk.client_id:
                self.sessions.add(self.zk.client_id[0])
            path = "%s/n-%08d" % (parent, self.created)
            data = b"kazoo %d" % self.created
            try:
                self.zk.create(path, data)
                self.ops += 1
                got, _ = self.zk.get(path)
                self.ops += 1
                if got != data:
                    raise ValueError("%s reads back %r" % (path, got))
            except Exception as e:  # any failure is what the test looks for
                self.errors += 1
                self.uncertain.append(path)
                say("busy error %s: %r" % (path, e))
            self.created += 1
            pause(0.05)
        self.stopping = True
        self.zk.stop()
        self.zk.close()

    def report(self):
        print("result busy connects=%d disconnects=%d sessions=%d errors=%d ops=%d" % (
            self.connects, self.disconnects, len(self.sessions), self.errors, self.ops))
        print("created busy %s/kazoo %d" % (prefix, self.created))
        for p in self.uncertain:
            print("uncertain busy %s" % p)


counts = dict(sessions=0, locks=0, elections=0, semaphores=0, expiries=0, lost=0, errors=0)
counts_lock = threading.Lock()


def count(name, line=None):
    with counts_lock:
        counts[name] += 1
    if line:
        say(line)


# KazooTimeoutError is start()'s when the connection drops right after it was made (the test cut
# it): start sees its event set but the client no longer connected.
LOSS = (ConnectionLoss, SessionExpiredError, ConnectionClosedError, OperationTimeoutError, LockTimeout,
        KazooTimeoutError)


def churn_client():
    zk = KazooClient(hosts=churn_hosts, timeout=churn_timeout,
                     connection_retry=dict(max_tries=-1, delay=0.1, backoff=1.5, max_delay=2),
                     command_retry=dict(max_tries=10, delay=0.1, backoff=1.5, max_delay=2))
    zk.start(timeout=60)
    return zk


def loop(what, body):
    def run():
        while running():
            try:
                body()
            except Exception as e:
                if not running():
                    return  # called off at the end of the hold (an election's cancel)
                if isinstance(e, LOSS):
                    count("lost", "churn %s lost: %r" % (what, e))
                else:
                    count("errors", "churn %s error: %r" % (what, e))
                pause(0.2)
    t = threading.Thread(target=run, name=what)
    t.start()
    return t


def session_round():
    zk = churn_client()
    try:
        zk.create(prefix + "/churn-sessions/s-", ephemeral=True, sequence=True, makepath=True)
        count("sessions")
    finally:
        zk.stop()
        zk.close()
    pause(0.1)


class Exclusive:
    """Counts the holders of something at most limit may hold at once."""

    def __init__(self, what, limit):
        self.what, self.limit, self.n = what, limit, 0
        self.mu = threading.Lock()

    def __enter__(self):
        with self.mu:
            self.n += 1
            if self.n > self.limit:
                count("errors", "churn %s error: %d holders at once" % (self.what, self.n))

    def __exit__(self, *exc):
        with self.mu:
            self.n -= 1


def lock_round(lock, held):
    if not lock.acquire(timeout=30):
        return
    try:
        with held:
            count("locks")
            pause(0.02)
    finally:
        lock.release()
    pause(0.03)


def semaphore_round(sem, held):
    if not sem.acquire(timeout=30):
        return
    try:
        with held:
            count("semaphores")
            pause(0.02)
    finally:
        sem.release()
    pause(0.03)


def election_round(zk, i, held):
    def lead():
        with held:
            count("elections")
            pause(0.02)
    election = zk.Election(prefix + "/election", "contender-%d" % i)
    elections.append(election)
    election.run(lead)
    pause(0.03)


elections = []
victims = [0]


def victim_round():
    lost = threading.Event()

    def changed(state):
        if state == KazooState.LOST:
            lost.set()
    # Reconnects are tried often, so that the victim learns of its expiry soon after the proxy
    # lets it through again.
    zk = KazooClient(hosts=expire_hosts, timeout=victim_timeout,
                     connection_retry=dict(max_tries=-1, delay=0.1, backoff=1.5, max_delay=1))
    zk.add_listener(changed)
    zk.start(timeout=60)
    try:
        path = zk.create("%s/victims/kazoo-%d-" % (prefix, victims[0]), ephemeral=True, sequence=True)
        victims[0] += 1
        say("expire-ready %s" % path)
        # The test expires the session within a few session timeouts; past the hold it may not,
        # and the victim just closes.
        while not lost.wait(0.1):
            if not running():
                return
        count("expiries")
        say("expired %s" % path)
    finally:
        zk.stop()
        zk.close()
    pause(0.2)


def main():
    held = Held()
    holder = threading.Thread(target=held.run, name="held")
    holder.start()
    cs = [churn_client() for _ in range(3)]
    cs[0].ensure_path(prefix + "/victims")
    threads = [loop("sessions", session_round)]
    lock_held, sem_held, lead_held = Exclusive("lock", 1), Exclusive("semaphore", 2), Exclusive("election", 1)
    for i in range(2):
        lock = cs[i].Lock(prefix + "/lock", "kazoo-%d" % i)
        threads.append(loop("lock", lambda lock=lock: lock_round(lock, lock_held)))
    for i in range(3):
        sem = cs[i].Semaphore(prefix + "/semaphore", "kazoo-%d" % i, max_leases=2)
        threads.append(loop("semaphore", lambda sem=sem: semaphore_round(sem, sem_held)))
    for i in range(2):
        threads.append(loop("election", lambda i=i: election_round(cs[i], i, lead_held)))
    threads.append(loop("victim", victim_round))
    holder.join()
    # Every churn thread ends within seconds of the hold (its calls have timeouts); one that
    # does not would leave the test to kill the process, so say first where each thread is.
    faulthandler.dump_traceback_later(90)
    # A contender still waiting for leadership when the hold ends is called off.
    for e in list(elections):
        e.cancel()
    for t in threads:
        t.join()
    for zk in cs:
        zk.stop()
        zk.close()
    faulthandler.cancel_dump_traceback_later()
    held.report()
    print("churn kazoo " + " ".join("%s=%d" % (k, counts[k]) for k in
                                    ("sessions", "locks", "elections", "semaphores", "expiries", "lost", "errors")), flush=True)


main()
