// A Curator InterProcessMutex contender for recipes' interop test (run as a source file):
// java -cp CURATOR CuratorContend.java HOSTS PATH ROUNDS
//
// Inside each hold it proves exclusion through the server (an ephemeral PATH-holder node that
// another holder would collide with, read back as its own) and records its fencing token (the
// czxid of its lock node) as a sequential child of PATH-fence, in the order the holds happen.
import java.nio.charset.StandardCharsets;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.locks.InterProcessMutex;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.zookeeper.CreateMode;
import org.apache.zookeeper.KeeperException;
import org.apache.zookeeper.data.Stat;

public class CuratorContend {
    public static void main(String[] args) throws Exception {
        String hosts = args[0], path = args[1];
        int rounds = Integer.parseInt(args[2]);
        CuratorFramework c = CuratorFrameworkFactory.newClient(hosts, 20000, 10000, new ExponentialBackoffRetry(100, 10));
        c.start();
        c.blockUntilConnected();
        InterProcessMutex m = new InterProcessMutex(c, path);
        for (int i = 0; i < rounds; i++) {
            m.acquire();
            try {
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
            } finally {
                m.release();
            }
        }
        c.close();
        System.out.println("OK");
    }
}
