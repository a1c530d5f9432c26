import java.io.BufferedReader;
import java.io.InputStreamReader;
import java.util.concurrent.CountDownLatch;
import java.util.concurrent.TimeUnit;
import java.util.concurrent.atomic.AtomicBoolean;

import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.WatchedEvent;
import org.apache.zookeeper.Watcher;
import org.apache.zookeeper.ZooDefs;
import org.apache.zookeeper.ZooKeeper;
import org.apache.zookeeper.data.Stat;

/**
 * A Java client that rides through a move from ZooKeeper to zkd (java CutoverClient.java host:port).
 * It opens a session, creates the ephemeral /java-eph and watches /watched, prints
 * "READY <session id in hex>", waits for a line on stdin, then prints "OK" if the same session is
 * connected again, still owns its ephemeral and saw its watch fire; otherwise "FAIL <why>".
 */
public class CutoverClient {
    public static void main(String[] args) throws Exception {
        CountDownLatch connected = new CountDownLatch(1);
        AtomicBoolean expired = new AtomicBoolean();
        // The move drops the connection to ZooKeeper; reconnected counts down once the client is
        // connected again after that (getState() may still say CONNECTED before it noticed).
        AtomicBoolean dropped = new AtomicBoolean();
        CountDownLatch reconnected = new CountDownLatch(1);
        ZooKeeper zk = new ZooKeeper(args[0], 30000, (WatchedEvent e) -> {
            if (e.getState() == Watcher.Event.KeeperState.Disconnected) {
                dropped.set(true);
            }
            if (e.getState() == Watcher.Event.KeeperState.SyncConnected) {
                connected.countDown();
                if (dropped.get()) {
                    reconnected.countDown();
                }
            }
            if (e.getState() == Watcher.Event.KeeperState.Expired) {
                expired.set(true);
            }
        });
        if (!connected.await(60, TimeUnit.SECONDS)) {
            System.out.println("FAIL no session");
            System.exit(1);
        }
        long sid = zk.getSessionId();
        zk.create("/java-eph", new byte[0], ZooDefs.Ids.OPEN_ACL_UNSAFE, CreateMode.EPHEMERAL);
        CountDownLatch fired = new CountDownLatch(1);
        zk.getData("/watched", (WatchedEvent e) -> {
            if (e.getType() == Watcher.Event.EventType.NodeDataChanged) {
                fired.countDown();
            }
        }, null);
        System.out.println("READY " + Long.toHexString(sid));
        System.out.flush();
        new BufferedReader(new InputStreamReader(System.in)).readLine();
        System.out.println(check(zk, sid, expired, reconnected, fired));
        System.out.flush();
        zk.close();
    }

    static String check(ZooKeeper zk, long sid, AtomicBoolean expired, CountDownLatch reconnected, CountDownLatch fired) throws Exception {
        boolean again = reconnected.await(60, TimeUnit.SECONDS);
        if (expired.get()) {
            return "FAIL the session expired";
        }
        if (!again) {
            return "FAIL not connected again: " + zk.getState();
        }
        if (zk.getSessionId() != sid) {
            return "FAIL a new session " + Long.toHexString(zk.getSessionId());
        }
        Stat st = zk.exists("/java-eph", false);
        if (st == null || st.getEphemeralOwner() != sid) {
            return "FAIL the ephemeral is gone";
        }
        if (!fired.await(30, TimeUnit.SECONDS)) {
            return "FAIL the watch never fired";
        }
        return "OK";
    }
}
