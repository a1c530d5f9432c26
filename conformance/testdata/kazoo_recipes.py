#!/usr/bin/env python3
"""Exercise kazoo's lock, semaphore and election recipes against a ZooKeeper-compatible server.

Usage: kazoo_recipes.py HOSTS BASE_PATH

Two kazoo clients contend for each recipe under BASE_PATH. Each step prints one line; the last
line is "ok" when every step passed. Any failure prints "FAIL: ..." and exits non-zero.
"""

import sys
import threading

from kazoo.client import KazooClient

TIMEOUT = 10.0


def fail(msg):
    print("FAIL: " + msg, flush=True)
    sys.exit(1)


def step(msg):
    print(msg, flush=True)


def check(cond, msg):
    if not cond:
        fail(msg)


def lock_contention(a, b, base):
    la = a.Lock(base + "/lock", "a")
    lb = b.Lock(base + "/lock", "b")
    check(la.acquire(timeout=TIMEOUT), "client a did not get the free lock")
    check(not lb.acquire(blocking=False), "client b got a lock held by a")
    check(la.contenders() == ["a"], "contenders while a holds: %r" % la.contenders())
    got = threading.Event()

    def waiter():
        if lb.acquire(timeout=TIMEOUT):
            got.set()

    t = threading.Thread(target=waiter)
    t.start()
    # b queues behind a; wait until its node is visible before releasing.
    deadline_ok = False
    for _ in range(200):
        if len(la.contenders()) == 2:
            deadline_ok = True
            break
        threading.Event().wait(0.05)
    check(deadline_ok, "b never queued: %r" % la.contenders())
    check(not got.is_set(), "b got the lock while a held it")
    la.release()
    t.join(TIMEOUT)
    check(got.is_set(), "b did not get the lock after a released it")
    check(not la.acquire(blocking=False), "a got a lock held by b")
    lb.release()
    check(la.acquire(timeout=TIMEOUT), "a could not take the lock back")
    la.release()
    step("lock: acquire, contention, hand-over and release")


def read_write_locks(a, b, base):
    path = base + "/rw"
    # Two readers share the lock.
    ra = a.ReadLock(path, "ra")
    rb = b.ReadLock(path, "rb")
    check(ra.acquire(timeout=TIMEOUT), "reader a blocked with no writer")
    check(rb.acquire(timeout=TIMEOUT), "reader b blocked by reader a")
    ra.release()
    rb.release()
    # A writer excludes a second writer and a reader; a reader excludes a writer.
    wa = a.WriteLock(path, "wa")
    wb = b.WriteLock(path, "wb")
    check(wa.acquire(timeout=TIMEOUT), "writer a blocked on a free lock")
    check(not wb.acquire(blocking=False), "writer b got the lock held by writer a")
    rb2 = b.ReadLock(path, "rb2")
    check(not rb2.acquire(blocking=False), "reader b got the lock held by writer a")
    wa.release()
    check(wb.acquire(timeout=TIMEOUT), "writer b blocked after writer a released")
    wb.release()
    ra2 = a.ReadLock(path, "ra2")
    check(ra2.acquire(timeout=TIMEOUT), "reader a blocked on a free lock")
    wb2 = b.WriteLock(path, "wb2")
    check(not wb2.acquire(blocking=False), "writer b got the lock held by reader a")
    ra2.release()
    check(wb2.acquire(timeout=TIMEOUT), "writer b blocked after the reader released")
    wb2.release()
    step("rwlock: shared readers, exclusive writers")


def semaphore(a, b, base):
    path = base + "/sem"
    sa1 = a.Semaphore(path, "a1", max_leases=2)
    sa2 = a.Semaphore(path, "a2", max_leases=2)
    sb = b.Semaphore(path, "b", max_leases=2)
    check(sa1.acquire(timeout=TIMEOUT), "first lease refused")
    check(sa2.acquire(timeout=TIMEOUT), "second lease refused")
    check(sorted(sa1.lease_holders()) == ["a1", "a2"], "holders %r" % sa1.lease_holders())
    check(not sb.acquire(blocking=False), "third lease granted with max_leases=2")
    sa1.release()
    check(sb.acquire(timeout=TIMEOUT), "lease not granted after a release")
    check(sorted(sb.lease_holders()) == ["a2", "b"], "holders %r" % sb.lease_holders())
    sa2.release()
    sb.release()
    check(sa1.lease_holders() == [], "holders after all released %r" % sa1.lease_holders())
    step("semaphore: two leases, a third waits, hand-over")


def election(a, b, base):
    path = base + "/election"
    ea = a.Election(path, "leader-a")
    eb = b.Election(path, "leader-b")
    a_leads = threading.Event()
    a_stop = threading.Event()
    b_leads = threading.Event()

    def lead_a():
        a_leads.set()
        a_stop.wait(TIMEOUT * 3)

    ta = threading.Thread(target=ea.run, args=(lead_a,))
    ta.start()
    check(a_leads.wait(TIMEOUT), "a never became leader")
    tb = threading.Thread(target=eb.run, args=(b_leads.set,))
    tb.start()
    for _ in range(200):
        if len(eb.contenders()) == 2:
            break
        threading.Event().wait(0.05)
    contenders = eb.contenders()
    check(contenders == ["leader-a", "leader-b"], "contenders %r" % contenders)
    check(not b_leads.is_set(), "b led while a was leader")
    a_stop.set()
    ta.join(TIMEOUT)
    check(b_leads.wait(TIMEOUT), "b did not become leader after a stepped down")
    tb.join(TIMEOUT)
    check(eb.contenders() == [], "contenders after both finished %r" % eb.contenders())
    step("election: leader, contender, succession")


def main():
    if len(sys.argv) != 3:
        fail("usage: kazoo_recipes.py HOSTS BASE_PATH")
    hosts, base = sys.argv[1], sys.argv[2]
    a = KazooClient(hosts=hosts, timeout=TIMEOUT)
    b = KazooClient(hosts=hosts, timeout=TIMEOUT)
    a.start(timeout=TIMEOUT)
    b.start(timeout=TIMEOUT)
    try:
        a.ensure_path(base)
        lock_contention(a, b, base)
        read_write_locks(a, b, base)
        semaphore(a, b, base)
        election(a, b, base)
    finally:
        a.stop()
        b.stop()
        a.close()
        b.close()
    print("ok", flush=True)


if __name__ == "__main__":
    main()
