// A ZooKeeper client driven over stdin for the client matrix: the Java client (mode "java") or
// Curator on top of it (mode "curator"). One command a line in, one answer a line out:
// "ok [detail]" or "err <ExceptionClass>". See clientmatrix/doc.go for the commands.
import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.ArrayList;
import java.util.List;
import java.util.TreeSet;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicInteger;

import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.api.BackgroundCallback;
import org.apache.curator.framework.api.CuratorEvent;
import org.apache.curator.retry.RetryNTimes;
import org.apache.zookeeper.AsyncCallback;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.admin.ZooKeeperAdmin;

public class Driver {
    static boolean curator;
    static ZooKeeperAdmin zk;
    static CuratorFramework cf;
    static volatile String lastEvent = "none";

    public static void main(String[] args) throws Exception {
        curator = args.length > 0 && args[0].equals("curator");
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        System.out.println("ready");
        System.out.flush();
        String line;
        while ((line = in.readLine()) != null) {
            String out;
            try {
                out = handle(line.trim().split(" "));
            } catch (KeeperException e) {
                out = "err " + e.getClass().getSimpleName();
            } catch (Throwable e) {
                out = "err " + e.getClass().getSimpleName();
            }
            System.out.println(out);
            System.out.flush();
        }
        System.exit(0);
    }

    static CreateMode mode(String m) {
        switch (m) {
            case "s": return CreateMode.PERSISTENT_SEQUENTIAL;
            case "e": return CreateMode.EPHEMERAL;
            default: return CreateMode.PERSISTENT;
        }
    }

    static String handle(String[] a) throws Exception {
        switch (a[0]) {
            case "connect": {
                int timeout = Integer.parseInt(a[2]);
                boolean ro = a[3].equals("1");
                if (curator) {
                    cf = CuratorFrameworkFactory.builder().connectString(a[1]).sessionTimeoutMs(timeout)
                        .connectionTimeoutMs(2000).retryPolicy(new RetryNTimes(2, 200)).canBeReadOnly(ro).build();
                    cf.getConnectionStateListenable().addListener((c, s) -> lastEvent = s.name());
                    cf.start();
                    if (!cf.blockUntilConnected(8, TimeUnit.SECONDS)) return "err NotConnected";
                    long sid = cf.getZookeeperClient().getZooKeeper().getSessionId();
                    byte[] pw = cf.getZookeeperClient().getZooKeeper().getSessionPasswd();
                    return "ok " + Long.toHexString(sid) + " " + hex(pw);
                }
                CountDownLatch up = new CountDownLatch(1);
                Watcher w = ev -> {
                    if (ev.getType() == Watcher.Event.EventType.None) {
                        lastEvent = ev.getState().name();
                        if (ev.getState() == Watcher.Event.KeeperState.SyncConnected
                            || ev.getState() == Watcher.Event.KeeperState.ConnectedReadOnly) up.countDown();
                    }
                };
                zk = new ZooKeeperAdmin(a[1], timeout, w, ro);
                if (!up.await(8, TimeUnit.SECONDS)) return "err NotConnected";
                return "ok " + Long.toHexString(zk.getSessionId()) + " " + hex(zk.getSessionPasswd());
            }
            case "create": {
                byte[] data = new byte[Integer.parseInt(a[2])];
                String p = curator
                    ? cf.create().withMode(mode(a[3])).forPath(a[1], data)
                    : zk.create(a[1], data, ZooDefs.Ids.OPEN_ACL_UNSAFE, mode(a[3]));
                return "ok " + p;
            }
            case "get": {
                byte[] d = curator ? cf.getData().forPath(a[1]) : zk.getData(a[1], false, null);
                return "ok " + (d == null ? 0 : d.length);
            }
            case "children": {
                List<String> c = curator ? cf.getChildren().forPath(a[1]) : zk.getChildren(a[1], false);
                return "ok " + c.size();
            }
            case "addauth":
                if (curator) {
                    // Curator adds auth only when it builds a connection; use its ZooKeeper handle.
                    cf.getZookeeperClient().getZooKeeper().addAuthInfo(a[1], a[2].getBytes());
                } else {
                    zk.addAuthInfo(a[1], a[2].getBytes());
                }
                return "ok";
            case "reconfig":
                if (curator) cf.reconfig().leaving("99").forEnsemble();
                else zk.reconfigure(null, "99", null, -1, null);
                return "ok";
            case "probe": {
                // A read with a watch, a write, and the watch delivered: the I/O and event threads work.
                CountDownLatch fired = new CountDownLatch(1);
                Watcher w = ev -> fired.countDown();
                if (curator) {
                    cf.checkExists().usingWatcher(w).forPath(a[1]);
                    cf.create().withMode(CreateMode.EPHEMERAL).forPath(a[1]);
                } else {
                    zk.exists(a[1], w);
                    zk.create(a[1], new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
                }
                if (!fired.await(10, TimeUnit.SECONDS)) return "err WatchNotDelivered";
                if (curator) cf.delete().forPath(a[1]); else zk.delete(a[1], -1);
                return "ok";
            }
            case "burst": {
                int n = Integer.parseInt(a[2]);
                CountDownLatch done = new CountDownLatch(n);
                AtomicInteger ok = new AtomicInteger();
                TreeSet<String> errs = new TreeSet<>();
                for (int i = 0; i < n; i++) {
                    String p = a[1] + "/n" + i + "-";
                    if (curator) {
                        BackgroundCallback cb = (c, ev) -> {
                            if (ev.getResultCode() == 0) ok.incrementAndGet();
                            else synchronized (errs) { errs.add(KeeperException.create(KeeperException.Code.get(ev.getResultCode())).getClass().getSimpleName()); }
                            done.countDown();
                        };
                        cf.create().withMode(CreateMode.PERSISTENT_SEQUENTIAL).inBackground(cb).forPath(p);
                    } else {
                        AsyncCallback.StringCallback cb = (rc, path, ctx, name) -> {
                            if (rc == 0) ok.incrementAndGet();
                            else synchronized (errs) { errs.add(KeeperException.create(KeeperException.Code.get(rc)).getClass().getSimpleName()); }
                            done.countDown();
                        };
                        zk.create(p, new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.PERSISTENT_SEQUENTIAL, cb, null);
                    }
                }
                // Wait for every result up to one deadline, then classify: answered, failed (by
                // exception name), or not completed yet.
                done.await(8, TimeUnit.SECONDS);
                synchronized (errs) {
                    long pending = done.getCount();
                    return "ok " + ok.get() + " " + (n - ok.get() - pending) + " " + pending + " "
                        + (errs.isEmpty() ? "-" : String.join(",", errs));
                }
            }
            case "state":
                if (curator) return "ok " + cf.getZookeeperClient().getZooKeeper().getState() + " " + lastEvent;
                return "ok " + zk.getState() + " " + lastEvent;
            case "close":
                if (curator) cf.close(); else zk.close();
                return "ok";
            default:
                return "err UnknownCommand";
        }
    }

    static String hex(byte[] b) {
        StringBuilder s = new StringBuilder();
        for (byte x : b) s.append(String.format("%02x", x));
        return s.toString();
    }
}
