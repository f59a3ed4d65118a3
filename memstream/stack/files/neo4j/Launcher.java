// Starts an embedded Neo4j 5.26 community DBMS with Bolt, for memstream's local stack.
//
// Why embedded: Maven Central has no Neo4j server tarball, but `org.neo4j:neo4j` (+ neo4j-bolt)
// is the full community DBMS; this class is the few lines of "server" around it.
// `memstream stack up` compiles it once into <stack_dir>/neo4j/classes and runs it as
//
//   java -cp "<classes>:<stack_dir>/lib/neo4j/*" Launcher <home> <bolt-port> <pagecache>
//        [bolt-host] [data-dir] [logs-dir]
//
// Auth is disabled (local dev stack, loopback only): the Python driver connects with auth=None.
// SIGTERM (or Ctrl-C) runs the shutdown hook, which checkpoints and closes the stores cleanly.
import java.nio.file.Path;
import java.util.concurrent.CountDownLatch;

import org.neo4j.configuration.GraphDatabaseInternalSettings;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.io.ByteUnit;
import org.neo4j.logging.Level;
import org.neo4j.logging.log4j.Log4jLogProvider;

public final class Launcher {
    public static void main(String[] args) throws InterruptedException {
        if (args.length < 3) {
            System.err.println("usage: Launcher <home> <bolt-port> <pagecache e.g. 256m> [bolt-host] [data-dir] [logs-dir]");
            System.exit(2);
        }
        Path home = Path.of(args[0]).toAbsolutePath();
        int port = Integer.parseInt(args[1]);
        long pagecache = ByteUnit.parse(args[2]);      // same syntax as neo4j.conf: 256m, 1g
        String host = args.length > 3 ? args[3] : "127.0.0.1";
        Path data = args.length > 4 ? Path.of(args[4]).toAbsolutePath() : home.resolve("data");
        Path logs = args.length > 5 ? Path.of(args[5]).toAbsolutePath() : home.resolve("logs");

        long t0 = System.nanoTime();
        DatabaseManagementService dbms;
        try {
            dbms = new DatabaseManagementServiceBuilder(home)
                    .setConfig(GraphDatabaseSettings.data_directory, data)
                    .setConfig(GraphDatabaseSettings.logs_directory, logs)   // debug.log lives here
                    .setConfig(GraphDatabaseSettings.pagecache_memory, pagecache)
                    .setConfig(GraphDatabaseSettings.auth_enabled, false)
                    .setConfig(GraphDatabaseSettings.udc_enabled, false)      // no network here anyway
                    // Transaction logs are preallocated (256 MiB each) by default: wasteful for a dev stack.
                    .setConfig(GraphDatabaseSettings.preallocate_logical_logs, false)
                    .setConfig(BoltConnector.enabled, true)
                    .setConfig(BoltConnector.listen_address, new SocketAddress(host, port))
                    .setConfig(BoltConnector.encryption_level, BoltConnector.EncryptionLevel.DISABLED)
                    // Keep-alive NOOPs every 10 s during *every* request, not only while streaming:
                    // the server then hints connection.recv_timeout_seconds = 20 (120 by default),
                    // and drivers drop a connection that stays silent that long. A write caught by a
                    // restart thus fails in 20 s (a transient error the projector waits out) instead
                    // of hanging in the driver for two minutes.
                    .setConfig(BoltConnector.connection_keep_alive_type, BoltConnector.KeepAliveRequestType.ALL)
                    .setConfig(BoltConnector.connection_keep_alive, java.time.Duration.ofSeconds(10))
                    // Netty waits a 5 s quiet period per event-loop group on shutdown (10 s per stop,
                    // after the stores are already checkpointed); 1 s is plenty for a local stack.
                    .setConfig(GraphDatabaseInternalSettings.netty_server_shutdown_quiet_period, 1)
                    // The "user log" (start/stop, errors) goes to stdout, which `stack up` sends to neo4j.log.
                    .setUserLogProvider(new Log4jLogProvider(System.out, Level.INFO))
                    .build();
        } catch (Throwable e) {
            e.printStackTrace();
            // Exit explicitly: threads Neo4j already started would otherwise keep the JVM alive.
            System.exit(1);
            return;
        }

        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            System.out.println("memstream-launcher: shutting down Neo4j");
            dbms.shutdown();
            System.out.println("memstream-launcher: Neo4j stopped");
            stopped.countDown();
        }, "neo4j-shutdown"));

        System.out.printf("memstream-launcher: Neo4j started in %.1f s, Bolt on %s:%d%n",
                (System.nanoTime() - t0) / 1e9, host, port);
        System.out.flush();
        stopped.await();   // park the main thread; the JVM exits after the hook has run
    }
}
