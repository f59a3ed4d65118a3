// Starts an embedded Neo4j 5.26 community DBMS with Bolt, for memstream's local stack.
//
// Why embedded: Maven Central has no Neo4j server tarball, but `org.neo4j:neo4j` (+ neo4j-bolt)
// is the full community DBMS; this class is the few lines of "server" around it.
// `memstream stack up` compiles it once into <stack_dir>/neo4j/classes and runs it as
//
//   java -cp "<classes>:<stack_dir>/lib/neo4j/*" Launcher <home> <bolt-port> <pagecache>
//        [bolt-host] [data-dir] [logs-dir]
//
// Auth is enabled. The password comes from the environment variable MEMSTREAM_NEO4J_PASSWORD
// (never argv: `ps` shows argv to every user); `stack up` passes the one it keeps in
// <stack_dir>/secrets/neo4j.password. At every start the launcher sets it for the user
// MEMSTREAM_NEO4J_USER (default neo4j) through the system database, so it is idempotent, and a
// store made while auth was disabled (user neo4j with the default password, change required)
// is taken over as is. Community edition has no roles: that one user can do everything.
// Once the password is set it writes <home>/launcher.ready (its pid): the health probe logs in
// only after that, so no attempt fails (and counts towards the user's lockout) while it starts.
// SIGTERM (or Ctrl-C) runs the shutdown hook, which checkpoints and closes the stores cleanly.
import java.io.IOException;
import java.nio.file.Files;
import java.nio.file.Path;
import java.nio.file.StandardCopyOption;
import java.util.Map;
import java.util.concurrent.CountDownLatch;

import org.neo4j.configuration.GraphDatabaseInternalSettings;
import org.neo4j.configuration.GraphDatabaseSettings;
import org.neo4j.configuration.connectors.BoltConnector;
import org.neo4j.configuration.helpers.SocketAddress;
import org.neo4j.dbms.api.DatabaseManagementService;
import org.neo4j.dbms.api.DatabaseManagementServiceBuilder;
import org.neo4j.graphdb.GraphDatabaseService;
import org.neo4j.internal.kernel.api.connectioninfo.ClientConnectionInfo;
import org.neo4j.internal.kernel.api.security.AuthenticationResult;
import org.neo4j.kernel.api.security.AuthManager;
import org.neo4j.kernel.api.security.AuthToken;
import org.neo4j.kernel.internal.GraphDatabaseAPI;
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
        String password = System.getenv("MEMSTREAM_NEO4J_PASSWORD");
        String user = System.getenv().getOrDefault("MEMSTREAM_NEO4J_USER", "neo4j");
        if (password == null || password.isEmpty()) {
            System.err.println("memstream-launcher: MEMSTREAM_NEO4J_PASSWORD is not set (`memstream stack up` sets it)");
            System.exit(2);
        }

        Path ready = home.resolve("launcher.ready");
        try {
            Files.deleteIfExists(ready);          // left by a launcher that was killed
        } catch (IOException e) {
            System.err.println("memstream-launcher: cannot remove " + ready + ": " + e);
            System.exit(1);
        }

        long t0 = System.nanoTime();
        DatabaseManagementService dbms;
        try {
            dbms = new DatabaseManagementServiceBuilder(home)
                    .setConfig(GraphDatabaseSettings.data_directory, data)
                    .setConfig(GraphDatabaseSettings.logs_directory, logs)   // debug.log lives here
                    .setConfig(GraphDatabaseSettings.pagecache_memory, pagecache)
                    .setConfig(GraphDatabaseSettings.auth_enabled, true)
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

        try {
            setPassword(dbms, user, password);
            Path tmp = home.resolve("launcher.ready.tmp");
            Files.writeString(tmp, ProcessHandle.current().pid() + "\n");
            Files.move(tmp, ready, StandardCopyOption.ATOMIC_MOVE, StandardCopyOption.REPLACE_EXISTING);
        } catch (Throwable e) {
            // The message only: it never holds the password (a parameter), but say nothing more.
            System.err.println("memstream-launcher: cannot set the password of Neo4j user " + user + ": " + e.getMessage());
            dbms.shutdown();
            System.exit(1);
            return;
        }

        CountDownLatch stopped = new CountDownLatch(1);
        Runtime.getRuntime().addShutdownHook(new Thread(() -> {
            System.out.println("memstream-launcher: shutting down Neo4j");
            try {
                Files.deleteIfExists(ready);
            } catch (IOException e) {
                // the next launcher removes it, and the probe checks its pid anyway
            }
            dbms.shutdown();
            System.out.println("memstream-launcher: Neo4j stopped");
            stopped.countDown();
        }, "neo4j-shutdown"));

        System.out.printf("memstream-launcher: Neo4j started in %.1f s, Bolt on %s:%d%n",
                (System.nanoTime() - t0) / 1e9, host, port);
        System.out.flush();
        stopped.await();   // park the main thread; the JVM exits after the hook has run
    }

    /** The application's one user gets `password`, no change required: at every start, so a new
     *  password in the secrets file takes effect on restart. Embedded transactions run with full
     *  rights, so this needs no login. The user is created when missing; when it is not neo4j,
     *  the default neo4j user (whose well-known initial password would let anyone in) is dropped. */
    static void setPassword(DatabaseManagementService dbms, String user, String password) {
        long t0 = System.nanoTime();
        GraphDatabaseService system = dbms.database(GraphDatabaseSettings.SYSTEM_DATABASE_NAME);
        // Every start after the first: the password is already the one we want. A login through
        // the auth manager tells, without the Cypher queries below (seconds in a cold JVM).
        if (user.equals("neo4j") && loginWorks(system, user, password)) {
            System.out.printf("memstream-launcher: password of user %s already set (checked in %.1f s)%n",
                    user, (System.nanoTime() - t0) / 1e9);
            return;
        }
        Map<String, Object> params = Map.of("user", user, "pw", password);
        system.executeTransactionally("CREATE USER $user IF NOT EXISTS SET PASSWORD $pw CHANGE NOT REQUIRED", params);
        try {
            system.executeTransactionally("ALTER USER $user SET PASSWORD $pw CHANGE NOT REQUIRED", params);
        } catch (RuntimeException e) {
            // Neo4j refuses to "change" a password to the one it has: then it is already set
            // (every start after the first, or a user CREATE just made); only the flag remains.
            if (!mentions(e, "Old password and new password cannot be the same")) throw e;
            system.executeTransactionally("ALTER USER $user SET PASSWORD CHANGE NOT REQUIRED", params);
        }
        if (!user.equals("neo4j")) {
            system.executeTransactionally("DROP USER neo4j IF EXISTS");
        }
        System.out.printf("memstream-launcher: password of user %s set in %.1f s%n", user, (System.nanoTime() - t0) / 1e9);
    }

    /** True if `user` logs in with `password` and needs no password change. Anything else
     *  (a wrong password, a missing user, an API that moved) means: set it. */
    static boolean loginWorks(GraphDatabaseService system, String user, String password) {
        try {
            AuthManager auth = ((GraphDatabaseAPI) system).getDependencyResolver().resolveDependency(AuthManager.class);
            return auth.login(AuthToken.newBasicAuthToken(user, password), ClientConnectionInfo.EMBEDDED_CONNECTION)
                    .subject().getAuthenticationResult() == AuthenticationResult.SUCCESS;
        } catch (Throwable e) {
            return false;
        }
    }

    static boolean mentions(Throwable e, String text) {
        for (Throwable t = e; t != null; t = t.getCause()) {
            if (t.getMessage() != null && t.getMessage().contains(text)) return true;
        }
        return false;
    }
}
