// Holds ZooKeeper Java client sessions open and reports every time one of them lost its
// connection. Run as a single source file, with the ZooKeeper jars on the class path:
//
//   java -cp zookeeper.jar:... LongLived.java HOSTS SECONDS TIMEOUT_MS [TLS_HOSTS KEYSTORE TRUSTSTORE PASSWORD]
//
// It opens an idle session (only the client's own pings) and a busy one (exists, create, setData
// and delete every 100 ms) on HOSTS, and the same two over TLS (PKCS12 stores) on TLS_HOSTS when
// given. For SECONDS it keeps them, then prints one line per session:
//
//   result NAME connects=N disconnects=N sessions=N errors=N ops=N
//
// connects counts SyncConnected events (1 for a connection that never dropped), disconnects
// every other connection state, sessions the session ids seen, errors the operations that failed.

import java.util.ArrayList;
import java.util.HashSet;
import java.util.List;
import java.util.Set;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.client.ZKClientConfig;

public class LongLived {
    static final long START = System.nanoTime();

    static synchronized void say(String line) {
        System.out.printf("%7.1f %s%n", (System.nanoTime() - START) / 1e9, line);
        System.out.flush();
    }

    static class Held implements Watcher, Runnable {
        final String name;
        final boolean busy;
        final ZooKeeper zk;
        final CountDownLatch connected = new CountDownLatch(1);
        final Set<Long> sessions = new HashSet<>();
        long until;
        int connects, disconnects, errors, ops;
        // stopping is set before close(): the server closes the connection once it answered
        // closeSession, and the client may report that as Disconnected before Closed.
        boolean stopping;

        Held(String name, String hosts, int timeoutMs, boolean busy, ZKClientConfig cfg) throws Exception {
            this.name = name;
            this.busy = busy;
            this.zk = new ZooKeeper(hosts, timeoutMs, this, cfg);
        }

        @Override
        public synchronized void process(WatchedEvent e) {
            if (e.getType() != Event.EventType.None) {
                return;
            }
            say(name + " state " + e.getState());
            if (stopping) {
                return;
            }
            if (e.getState() == Event.KeeperState.SyncConnected) {
                connects++;
                connected.countDown();
            } else if (e.getState() != Event.KeeperState.Closed) {
                disconnects++;
            }
        }

        @Override
        public void run() {
            try {
                if (!connected.await(60, TimeUnit.SECONDS)) {
                    synchronized (this) { errors++; }
                    say(name + " error: no connection within 60 s");
                }
                String path = "/long-lived-java-" + ProcessHandle.current().pid() + "-" + name;
                while (System.nanoTime() < until) {
                    synchronized (this) { sessions.add(zk.getSessionId()); }
                    if (busy) {
                        try {
                            zk.exists("/", false);
                            zk.create(path, "v".getBytes(), ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT);
                            zk.setData(path, "w".getBytes(), -1);
                            zk.delete(path, -1);
                            synchronized (this) { ops += 4; }
                        } catch (Exception e) {
                            synchronized (this) { errors++; }
                            say(name + " error " + e);
                            try { zk.delete(path, -1); } catch (Exception ignored) { }
                        }
                        Thread.sleep(100);
                    } else {
                        Thread.sleep(500);
                    }
                }
                synchronized (this) { stopping = true; }
                zk.close();
            } catch (InterruptedException e) {
                Thread.currentThread().interrupt();
            }
        }

        synchronized String result() {
            return String.format("result %s connects=%d disconnects=%d sessions=%d errors=%d ops=%d",
                    name, connects, disconnects, sessions.size(), errors, ops);
        }
    }

    public static void main(String[] a) throws Exception {
        String hosts = a[0];
        double seconds = Double.parseDouble(a[1]);
        int timeoutMs = Integer.parseInt(a[2]);
        List<Held> held = new ArrayList<>();
        held.add(new Held("idle", hosts, timeoutMs, false, new ZKClientConfig()));
        held.add(new Held("busy", hosts, timeoutMs, true, new ZKClientConfig()));
        if (a.length > 3) {
            for (String mode : new String[] {"idle-tls", "busy-tls"}) {
                ZKClientConfig cfg = new ZKClientConfig();
                cfg.setProperty("zookeeper.client.secure", "true");
                cfg.setProperty("zookeeper.clientCnxnSocket", "org.apache.zookeeper.ClientCnxnSocketNetty");
                cfg.setProperty("zookeeper.ssl.keyStore.location", a[4]);
                cfg.setProperty("zookeeper.ssl.keyStore.password", a[6]);
                cfg.setProperty("zookeeper.ssl.trustStore.location", a[5]);
                cfg.setProperty("zookeeper.ssl.trustStore.password", a[6]);
                held.add(new Held(mode, a[3], timeoutMs, mode.startsWith("busy"), cfg));
            }
        }
        long until = System.nanoTime() + (long) (seconds * 1e9);
        List<Thread> threads = new ArrayList<>();
        for (Held h : held) {
            h.until = until;
            Thread t = new Thread(h);
            t.start();
            threads.add(t);
        }
        for (Thread t : threads) {
            t.join();
        }
        for (Held h : held) {
            System.out.println(h.result());
        }
        System.out.flush();
        System.exit(0);
    }
}
