// A long-lived Curator client that creates znodes and reads them back, beside Curator and
// ZooKeeper clients that churn: sessions opened and closed, InterProcessMutex, LeaderLatch,
// InterProcessSemaphoreV2, and sessions that the test expires. Run as a single source file with
// Curator and ZooKeeper on the class path (Debian's jars name their dependencies):
//
//   java -cp curator-recipes.jar:zookeeper.jar MixedClients.java \
//       HOLD_HOSTS CHURN_HOSTS EXPIRE_HOSTS SECONDS HOLD_TIMEOUT_MS CHURN_TIMEOUT_MS VICTIM_TIMEOUT_MS PREFIX
//
// The long-lived client connects to HOLD_HOSTS (the servers themselves); the churners connect to
// CHURN_HOSTS and the victims to EXPIRE_HOSTS, proxies the test controls. A victim opens a
// session, creates an ephemeral znode, prints
//
//   expire-ready PATH
//
// and waits for the test to expire its session (it cuts or stalls the victim's proxy until PATH
// is gone), then prints "expired PATH" and starts the next one. After SECONDS it prints
//
//   result busy connects=N disconnects=N sessions=N errors=N ops=N
//   created busy PARENT N      the long-lived client was told its creates PARENT/n-00000000 .. N-1 succeeded,
//   uncertain busy PATH        except this one, which failed (one line each)
//   churn curator sessions=N locks=N latches=N semaphores=N expiries=N lost=N errors=N
//
// connects counts CONNECTED and RECONNECTED, disconnects SUSPENDED, LOST and READ_ONLY, errors
// the long-lived client's failed operations. A churner's failure is "lost" when it is the
// connection loss or session expiry a cut brings (the test cuts churners' connections too) and
// an error otherwise; an error is also two holders of the mutex or three of the semaphore's two
// leases at once.

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessSemaphoreV2;
import org.apache.curator.framework.recipes.locks.Lease;
import org.apache.curator.framework.state.ConnectionState;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;

public class MixedClients {
    static final long START = System.nanoTime();
    static String churnHosts, expireHosts, prefix;
    static int churnTimeout, victimTimeout;
    static long until;

    static synchronized void say(String line) {
        System.out.printf("%7.1f %s%n", (System.nanoTime() - START) / 1e9, line);
        System.out.flush();
    }

    static boolean running() { return System.nanoTime() < until; }

    // Pacing on the real clock: the churners run for a span of real time at a modest rate, so a
    // loaded 2-core machine keeps up; there is no event to pace on.
    static void pause(long ms) throws InterruptedException { Thread.sleep(ms); }

    // The long-lived client.
    static class Held {
        final CuratorFramework cf;
        final Set<Long> sessions = new HashSet<>();
        final List<String> uncertain = new ArrayList<>();
        int connects, disconnects, errors, ops, created;
        boolean stopping;

        Held(String hosts, int timeoutMs) {
            // No retries: a failure the client would otherwise retry past is what the test looks for.
            cf = CuratorFrameworkFactory.builder().connectString(hosts).sessionTimeoutMs(timeoutMs)
                    .connectionTimeoutMs(60000).retryPolicy(new RetryNTimes(0, 0)).build();
            cf.getConnectionStateListenable().addListener((c, s) -> changed(s));
        }

        synchronized void changed(ConnectionState s) {
            say("busy state " + s);
            if (stopping) {
                return;
            }
            if (s == ConnectionState.CONNECTED || s == ConnectionState.RECONNECTED) {
                connects++;
            } else {
                disconnects++;
            }
        }

        void run() throws Exception {
            cf.start();
            if (!cf.blockUntilConnected(60, TimeUnit.SECONDS)) {
                synchronized (this) { errors++; }
                say("busy error: no connection within 60 s");
                return;
            }
            String parent = prefix + "/curator";
            try {
                cf.create().creatingParentsIfNeeded().forPath(parent);
            } catch (Exception e) {
                synchronized (this) { errors++; }
                say("busy error creating " + parent + ": " + e);
            }
            while (running()) {
                synchronized (this) { sessions.add(cf.getZookeeperClient().getZooKeeper().getSessionId()); }
                String path = String.format("%s/n-%08d", parent, created);
                byte[] data = ("curator " + created).getBytes();
                try {
                    cf.create().forPath(path, data);
                    synchronized (this) { ops++; }
                    byte[] got = cf.getData().forPath(path);
                    synchronized (this) { ops++; }
                    if (!new String(got).equals(new String(data))) {
                        throw new IllegalStateException(path + " reads back " + new String(got));
                    }
                } catch (Exception e) {
                    synchronized (this) { errors++; uncertain.add(path); }
                    say("busy error " + path + ": " + e);
                }
                created++;
                pause(50);
            }
            synchronized (this) { stopping = true; }
            cf.close();
        }

        synchronized void report() {
            System.out.printf("result busy connects=%d disconnects=%d sessions=%d errors=%d ops=%d%n",
                    connects, disconnects, sessions.size(), errors, ops);
            System.out.printf("created busy %s/curator %d%n", prefix, created);
            for (String p : uncertain) {
                System.out.printf("uncertain busy %s%n", p);
            }
        }
    }

    static final AtomicInteger sessions = new AtomicInteger(), locks = new AtomicInteger(),
            latches = new AtomicInteger(), semaphores = new AtomicInteger(), expiries = new AtomicInteger(),
            lost = new AtomicInteger(), errors = new AtomicInteger();

    static boolean isLoss(Throwable e) {
        for (Throwable c = e; c != null; c = c.getCause()) {
            if (c instanceof KeeperException.ConnectionLossException || c instanceof KeeperException.SessionExpiredException
                    || c instanceof KeeperException.OperationTimeoutException || c instanceof InterruptedException) {
                return true;
            }
        }
        return false;
    }

    static void failed(String what, Throwable e) {
        if (isLoss(e)) {
            lost.incrementAndGet();
            say("churn " + what + " lost: " + e);
        } else {
            errors.incrementAndGet();
            say("churn " + what + " error: " + e);
        }
    }

    static CuratorFramework churnClient() throws Exception {
        CuratorFramework cf = CuratorFrameworkFactory.builder().connectString(churnHosts).sessionTimeoutMs(churnTimeout)
                .connectionTimeoutMs(60000).retryPolicy(new ExponentialBackoffRetry(100, 10, 2000)).build();
        cf.start();
        if (!cf.blockUntilConnected(60, TimeUnit.SECONDS)) {
            throw new IllegalStateException("no connection within 60 s");
        }
        return cf;
    }

    interface Body { void run() throws Exception; }

    static Thread loop(String what, Body body) {
        Thread t = new Thread(() -> {
            while (running()) {
                try {
                    body.run();
                } catch (Exception e) {
                    failed(what, e);
                    try { pause(200); } catch (InterruptedException ie) { return; }
                }
            }
        }, what);
        t.start();
        return t;
    }

    // Sessions opened and closed, each leaving an ephemeral znode that its close removes.
    static void sessionChurn() throws Exception {
        CuratorFramework cf = churnClient();
        try {
            cf.create().creatingParentContainersIfNeeded().withMode(CreateMode.EPHEMERAL_SEQUENTIAL)
                    .forPath(prefix + "/churn-sessions/s-");
            sessions.incrementAndGet();
        } finally {
            cf.close();
        }
        pause(100);
    }

    // A worker that takes the mutex, holds it briefly and lets it go; holders counts them.
    static void lockRound(InterProcessMutex m, AtomicInteger holders) throws Exception {
        if (!m.acquire(30, TimeUnit.SECONDS)) {
            return;
        }
        try {
            if (holders.incrementAndGet() > 1) {
                errors.incrementAndGet();
                say("churn lock error: two holders at once");
            }
            locks.incrementAndGet();
            pause(20);
        } finally {
            holders.decrementAndGet();
            m.release();
        }
        pause(30);
    }

    // Two latches on one path: one leads, closes, and the other must take over.
    static void latchRound(CuratorFramework a, CuratorFramework b) throws Exception {
        String path = prefix + "/latch";
        LeaderLatch la = new LeaderLatch(a, path, "a"), lb = new LeaderLatch(b, path, "b");
        la.start();
        lb.start();
        try {
            LeaderLatch first = null;
            for (long end = System.nanoTime() + TimeUnit.SECONDS.toNanos(30); first == null && System.nanoTime() < end; ) {
                if (la.await(100, TimeUnit.MILLISECONDS)) {
                    first = la;
                } else if (lb.hasLeadership()) {
                    first = lb;
                }
            }
            if (first == null) {
                throw new IllegalStateException("no leader within 30 s");
            }
            LeaderLatch second = first == la ? lb : la;
            first.close();
            if (!second.await(30, TimeUnit.SECONDS)) {
                throw new IllegalStateException("the second latch did not lead within 30 s of the first closing");
            }
            latches.incrementAndGet();
        } finally {
            for (LeaderLatch l : new LeaderLatch[] {la, lb}) {
                if (l.getState() == LeaderLatch.State.STARTED) {
                    l.close();
                }
            }
        }
        pause(100);
    }

    static void semaphoreRound(InterProcessSemaphoreV2 s, AtomicInteger holders) throws Exception {
        Lease lease = s.acquire(30, TimeUnit.SECONDS);
        if (lease == null) {
            return;
        }
        try {
            if (holders.incrementAndGet() > 2) {
                errors.incrementAndGet();
                say("churn semaphore error: more holders than leases");
            }
            semaphores.incrementAndGet();
            pause(20);
        } finally {
            holders.decrementAndGet();
            s.returnLease(lease);
        }
        pause(30);
    }

    // A victim session: it waits for the test to expire it through its proxy.
    static int victims;

    static void victim() throws Exception {
        CountDownLatch connected = new CountDownLatch(1), expired = new CountDownLatch(1);
        Watcher w = (WatchedEvent e) -> {
            if (e.getType() != Watcher.Event.EventType.None) {
                return;
            }
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
            } else if (e.getState() == Watcher.Event.KeeperState.Expired) {
                expired.countDown();
            }
        };
        ZooKeeper zk = new ZooKeeper(expireHosts, victimTimeout, w);
        try {
            if (!connected.await(60, TimeUnit.SECONDS)) {
                throw new IllegalStateException("victim: no connection within 60 s");
            }
            String path = zk.create(String.format("%s/victims/curator-%d-", prefix, victims++), null,
                    ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL_SEQUENTIAL);
            say("expire-ready " + path);
            // The test expires the session within a few session timeouts; past the hold it may
            // not, and the victim just closes.
            while (!expired.await(100, TimeUnit.MILLISECONDS)) {
                if (!running()) {
                    return;
                }
            }
            expiries.incrementAndGet();
            say("expired " + path);
        } finally {
            zk.close();
        }
        pause(200);
    }

    public static void main(String[] a) throws Exception {
        String holdHosts = a[0];
        churnHosts = a[1];
        expireHosts = a[2];
        double seconds = Double.parseDouble(a[3]);
        int holdTimeout = Integer.parseInt(a[4]);
        churnTimeout = Integer.parseInt(a[5]);
        victimTimeout = Integer.parseInt(a[6]);
        prefix = a[7];
        until = System.nanoTime() + (long) (seconds * 1e9);

        Held held = new Held(holdHosts, holdTimeout);
        Thread holder = new Thread(() -> {
            try {
                held.run();
            } catch (Exception e) {
                synchronized (held) { held.errors++; }
                say("busy error " + e);
            }
        }, "held");
        holder.start();

        // The churners share a few clients (the recipes' contenders are separate sessions) and
        // open their own in the session churn.
        CuratorFramework[] cs = new CuratorFramework[3];
        for (int i = 0; i < cs.length; i++) {
            cs[i] = churnClient();
        }
        cs[0].create().creatingParentContainersIfNeeded().forPath(prefix + "/victims");
        List<Thread> threads = new ArrayList<>();
        threads.add(loop("sessions", MixedClients::sessionChurn));
        AtomicInteger lockHolders = new AtomicInteger(), semHolders = new AtomicInteger();
        for (int i = 0; i < 2; i++) {
            InterProcessMutex m = new InterProcessMutex(cs[i], prefix + "/lock");
            threads.add(loop("lock", () -> lockRound(m, lockHolders)));
        }
        threads.add(loop("latch", () -> latchRound(cs[0], cs[1])));
        for (int i = 0; i < 3; i++) {
            InterProcessSemaphoreV2 s = new InterProcessSemaphoreV2(cs[i], prefix + "/semaphore", 2);
            threads.add(loop("semaphore", () -> semaphoreRound(s, semHolders)));
        }
        threads.add(loop("victim", MixedClients::victim));

        holder.join();
        for (Thread t : threads) {
            t.join();
        }
        for (CuratorFramework c : cs) {
            c.close();
        }
        held.report();
        System.out.printf("churn curator sessions=%d locks=%d latches=%d semaphores=%d expiries=%d lost=%d errors=%d%n",
                sessions.get(), locks.get(), latches.get(), semaphores.get(), expiries.get(), lost.get(), errors.get());
        System.out.flush();
        System.exit(0);
    }
}
