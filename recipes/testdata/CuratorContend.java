// A Curator InterProcessMutex contender for recipes' interop tests (run as a source file):
// java -cp CURATOR CuratorContend.java HOSTS PATH ROUNDS [SESSION_TIMEOUT_MS [read|write|leader]]
//
// With leader it takes ROUNDS terms of leadership with a LeaderSelector (autoRequeue) instead,
// each term one critical section.
//
// With read or write it takes that side of an InterProcessReadWriteLock on PATH instead, ROUNDS
// times. A writer's section creates the ephemeral PATH-writer and then finds PATH-readers empty;
// a reader's creates an ephemeral child of PATH-readers and then finds no PATH-writer. Both
// create before they look, so two sections that overlap where they must not always see each
// other; either prints OVERLAP and exits 3.
//
// With a number of ROUNDS it prints READY once connected and starts when a line arrives on its
// standard input. ROUNDS "hold": acquire, print HELD and keep the lock until killed. ROUNDS "wait": acquire,
// print ACQUIRED, release and exit.
//
// Inside each hold it proves exclusion through the server (an ephemeral PATH-holder node that
// another holder would collide with, read back as its own) and records its fencing token (the
// czxid of its lock node) as a sequential child of PATH-fence, in the order the holds happen.
import java.nio.charset.StandardCharsets;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderSelector;
import org.apache.curator.framework.recipes.leader.LeaderSelectorListenerAdapter;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.framework.recipes.locks.InterProcessReadWriteLock;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

public class CuratorContend {
    public static void main(String[] args) throws Exception {
        String hosts = args[0], path = args[1];
        int sessionMs = args.length > 3 ? Integer.parseInt(args[3]) : 20000;
        CuratorFramework c = CuratorFrameworkFactory.newClient(hosts, sessionMs, 10000, new ExponentialBackoffRetry(100, 10));
        c.start();
        c.blockUntilConnected();
        InterProcessMutex m = new InterProcessMutex(c, path);
        if (args[2].equals("hold")) {
            m.acquire();
            System.out.println("HELD");
            System.out.flush();
            Thread.sleep(Long.MAX_VALUE);
        }
        if (args[2].equals("wait")) {
            m.acquire();
            System.out.println("ACQUIRED");
            System.out.flush();
            m.release();
            c.close();
            return;
        }
        int rounds = Integer.parseInt(args[2]);
        // Start together with the test's other contenders: say so, then wait for its go-ahead.
        System.out.println("READY");
        System.out.flush();
        new java.io.BufferedReader(new java.io.InputStreamReader(System.in)).readLine();
        if (args.length > 4 && !args[4].equals("leader")) {
            boolean write = args[4].equals("write");
            InterProcessReadWriteLock rw = new InterProcessReadWriteLock(c, path);
            InterProcessMutex side = write ? rw.writeLock() : rw.readLock();
            for (int i = 0; i < rounds; i++) {
                side.acquire();
                try {
                    if (write) {
                        try {
                            c.create().withMode(CreateMode.EPHEMERAL).forPath(path + "-writer");
                        } catch (KeeperException.NodeExistsException e) {
                            System.out.println("OVERLAP");
                            System.exit(3);
                        }
                        if (!c.getChildren().forPath(path + "-readers").isEmpty()) {
                            System.out.println("OVERLAP");
                            System.exit(3);
                        }
                        c.delete().forPath(path + "-writer");
                    } else {
                        String mine = c.create().withMode(CreateMode.EPHEMERAL_SEQUENTIAL).forPath(path + "-readers/r-");
                        if (c.checkExists().forPath(path + "-writer") != null) {
                            System.out.println("OVERLAP");
                            System.exit(3);
                        }
                        c.delete().forPath(mine);
                    }
                } finally {
                    side.release();
                }
            }
            c.close();
            System.out.println("OK");
            return;
        }
        if (args.length > 4 && args[4].equals("leader")) {
            // Leadership by LeaderSelector (an InterProcessMutex inside), requeued after each term.
            final java.util.concurrent.atomic.AtomicInteger terms = new java.util.concurrent.atomic.AtomicInteger();
            final java.util.concurrent.CountDownLatch done = new java.util.concurrent.CountDownLatch(1);
            LeaderSelector ls = new LeaderSelector(c, path, new LeaderSelectorListenerAdapter() {
                @Override
                public void takeLeadership(CuratorFramework cf) throws Exception {
                    if (terms.get() < rounds) {
                        section(c, path);
                    }
                    if (terms.incrementAndGet() >= rounds) {
                        done.countDown();
                    }
                }
            });
            ls.autoRequeue();
            ls.start();
            done.await();
            ls.close();
        } else {
            for (int i = 0; i < rounds; i++) {
                m.acquire();
                try {
                    section(c, path);
                } finally {
                    m.release();
                }
            }
        }
        c.close();
        System.out.println("OK");
    }

    // section is a holder's critical section: it proves exclusion through the server and records
    // the holder's fencing token (the czxid of its lock node) in PATH-fence.
    static void section(CuratorFramework c, String path) throws Exception {
        long sid = c.getZookeeperClient().getZooKeeper().getSessionId();
        try {
            c.create().withMode(CreateMode.EPHEMERAL).forPath(path + "-holder", "curator".getBytes(StandardCharsets.UTF_8));
        } catch (KeeperException.NodeExistsException e) {
            System.out.println("OVERLAP");
            System.exit(3);
        }
        Stat st = new Stat();
        c.getData().storingStatIn(st).forPath(path + "-holder");
        if (st.getEphemeralOwner() != sid) {
            System.out.println("OVERLAP");
            System.exit(3);
        }
        long czxid = -1;
        for (String child : c.getChildren().forPath(path)) {
            Stat cs = c.checkExists().forPath(path + "/" + child);
            if (cs != null && cs.getEphemeralOwner() == sid) {
                czxid = cs.getCzxid();
            }
        }
        c.create().withMode(CreateMode.PERSISTENT_SEQUENTIAL)
                .forPath(path + "-fence/f-", ("curator:" + czxid).getBytes(StandardCharsets.UTF_8));
        c.delete().forPath(path + "-holder");
    }
}
