// A Curator LeaderLatch candidate the election interop test drives a step at a time (run as a
// source file): java -cp CURATOR LatchCandidate.java HOSTS PATH ID SESSION_TIMEOUT_MS
//
// It prints READY once connected, then reads commands from its standard input:
//   campaign  start a LeaderLatch with id ID on PATH; print QUEUED <node> once its node exists,
//             and LEADING when the latch reports leadership
//   leader    print LEADER <id> of the leader Curator names on PATH (getLeader), or LEADER -
//   resign    close the latch (its node is deleted) and print RESIGNED
import java.io.BufferedReader;
import java.io.InputStreamReader;
import org.apache.curator.framework.CuratorFramework;
import org.apache.curator.framework.CuratorFrameworkFactory;
import org.apache.curator.framework.recipes.leader.LeaderLatch;
import org.apache.curator.framework.recipes.leader.LeaderLatchListener;
import org.apache.curator.framework.recipes.leader.Participant;
import org.apache.curator.retry.ExponentialBackoffRetry;
import org.apache.curator.utils.ZKPaths;

public class LatchCandidate {
    public static void main(String[] args) throws Exception {
        String hosts = args[0], path = args[1], id = args[2];
        int sessionMs = Integer.parseInt(args[3]);
        CuratorFramework c = CuratorFrameworkFactory.newClient(hosts, sessionMs, 10000, new ExponentialBackoffRetry(100, 10));
        c.start();
        c.blockUntilConnected();
        say("READY");
        LeaderLatch latch = null;
        BufferedReader in = new BufferedReader(new InputStreamReader(System.in));
        for (String cmd; (cmd = in.readLine()) != null; ) {
            switch (cmd.trim()) {
                case "campaign":
                    latch = new LeaderLatch(c, path, id);
                    latch.addListener(new LeaderLatchListener() {
                        @Override
                        public void isLeader() {
                            say("LEADING");
                        }

                        @Override
                        public void notLeader() {
                            say("NOT-LEADING");
                        }
                    });
                    latch.start();
                    while (latch.getOurPath() == null) {
                        Thread.sleep(5);
                    }
                    say("QUEUED " + ZKPaths.getNodeFromPath(latch.getOurPath()));
                    break;
                case "leader":
                    // An unstarted latch reads the participants as any observer would.
                    Participant p = new LeaderLatch(c, path, "observer").getLeader();
                    say("LEADER " + (p.getId().isEmpty() ? "-" : p.getId()));
                    break;
                case "resign":
                    latch.close();
                    say("RESIGNED");
                    break;
                default:
                    say("UNKNOWN " + cmd);
            }
        }
        c.close();
    }

    static synchronized void say(String line) {
        System.out.println(line);
        System.out.flush();
    }
}
