import Foundation

/// A throwaway PostgreSQL cluster for the tests: Debian's server binaries, `initdb` in a
/// temporary directory, `pg_ctl` on a port of its own on 127.0.0.1 (and a Unix socket in the
/// same directory), stopped and deleted when the test process exits. A process that crashed
/// cannot do that, so the first use of the shared cluster stops and deletes the clusters no live
/// process owns (each is a few hundred megabytes; left behind they fill the disk). Ownership is
/// an flock on `owner.lock` in the cluster's directory, held from creation until `remove()`:
/// the kernel drops it when its process dies, whatever PID namespace that process ran in (a CI
/// container sharing /tmp), and a reused PID cannot fake it.
/// PostgreSQL refuses to run as root, so as root it runs as the `postgres` user (`runuser`).
///
/// ```swift
/// let url = try PostgresServer.shared().createDatabase()   // a fresh, empty database
/// ```
public final class PostgresServer: @unchecked Sendable {
    public struct Unavailable: Error, CustomStringConvertible {
        public let description: String
    }

    public let directory: String
    public let port: Int
    private let binaries: String
    /// The descriptor holding the ownership lock (-1 for a handle on an abandoned cluster).
    private var ownerLock: Int32 = -1
    /// Addresses listened on besides 127.0.0.1.
    private let extraAddress: String?
    private let lock = NSLock()
    private var databases = 0

    nonisolated(unsafe) private static var sharedServer: PostgresServer?
    private static let sharedLock = NSLock()

    /// The cluster shared by every test of this process, started on first use.
    public static func shared() throws -> PostgresServer {
        try sharedLock.withLock {
            if let server = sharedServer { return server }
            removeAbandonedClusters()
            let server = try PostgresServer()
            sharedServer = server
            atexit {
                PostgresServer.sharedServer?.stop()
                PostgresServer.sharedServer?.remove()
            }
            return server
        }
    }

    /// A cluster of the caller's own, for a test that stops or restarts it (which would break
    /// the other tests on the shared one). The caller stops it with `stop()` and `remove()`.
    public static func dedicated() throws -> PostgresServer { try PostgresServer() }

    /// A dedicated cluster that also listens on `address` (a host-side address network
    /// namespaces reach) and trusts clients from `network` (CIDR), for the several-machines tests.
    public static func dedicated(alsoListeningOn address: String, trusting network: String) throws -> PostgresServer {
        try PostgresServer(extraAddress: address, trustedNetwork: network)
    }

    /// Deletes the cluster's files (after `stop()`).
    public func remove() {
        try? FileManager.default.removeItem(atPath: directory)
        releaseOwnership()
    }

    /// Lets go of the ownership lock: from now on the cluster counts as abandoned (what a crash
    /// does; a test of the sweep uses it).
    public func releaseOwnership() {
        if ownerLock >= 0 { close(ownerLock) }
        ownerLock = -1
    }

    private static let lockName = "owner.lock"

    private static let directoryPrefix = "orchestrate-pg-"

    /// Stops and deletes the clusters nobody owns: their `owner.lock` can be locked (a directory
    /// without one, from before the lock, goes by the process id in its name,
    /// `orchestrate-pg-PID-RANDOM`). A server that will not stop is killed first: deleted files
    /// under a running server would keep their disk space.
    public static func removeAbandonedClusters() {
        let temporary = NSTemporaryDirectory()
        let names = (try? FileManager.default.contentsOfDirectory(atPath: temporary)) ?? []
        for name in names where name.hasPrefix(directoryPrefix) {
            let directory = temporary + name
            let lock = open(directory + "/" + lockName, O_RDWR | O_CLOEXEC)
            if lock >= 0 {
                defer { close(lock) }  // after the removal: nobody can take it over meanwhile
                guard flock(lock, LOCK_EX | LOCK_NB) == 0 else { continue }
                removeAbandoned(directory)
            } else {
                let fields = name.dropFirst(directoryPrefix.count).split(separator: "-")
                guard fields.count == 2, let pid = pid_t(fields[0]), pid != getpid(), kill(pid, 0) != 0, errno == ESRCH else { continue }
                removeAbandoned(directory)
            }
        }
    }

    private static func removeAbandoned(_ directory: String) {
        guard let binaries = findBinaries() else { return }
        let abandoned = PostgresServer(abandonedAt: directory, binaries: binaries)
        abandoned.stop()
        if let text = try? String(contentsOfFile: directory + "/data/postmaster.pid", encoding: .utf8),
           let pid = text.split(separator: "\n").first.flatMap({ pid_t($0) }), pid > 0,
           (try? String(contentsOfFile: "/proc/\(pid)/comm", encoding: .utf8))?.hasPrefix("postgres") == true
        {
            kill(pid, SIGKILL)  // still there only if the stop failed (and not a reused id)
        }
        abandoned.remove()
    }

    /// A handle on an existing cluster's directory, only to stop and delete it.
    private init(abandonedAt directory: String, binaries: String) {
        self.directory = directory
        self.binaries = binaries
        self.port = 0
        self.extraAddress = nil
    }

    /// The superuser's URL of database `name` (on `host`, 127.0.0.1 unless given).
    public func url(_ name: String = "postgres", host: String = "127.0.0.1") -> String {
        "postgresql://postgres@\(host):\(port)/\(name)"
    }

    /// Creates an empty database and returns its URL.
    public func createDatabase(prefix: String = "orc") throws -> String {
        let name = lock.withLock { () -> String in
            databases += 1
            return "\(prefix)_\(getpid())_\(databases)"
        }
        try sql("CREATE DATABASE \(name)")
        return url(name)
    }

    /// Runs SQL as the superuser with psql; throws with psql's message when it fails.
    @discardableResult
    public func sql(_ statement: String, database: String = "postgres") throws -> String {
        let result = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/psql"),
                                          ["-X", "-q", "-At", "-v", "ON_ERROR_STOP=1", "-d", url(database), "-c", statement])
        guard result.status == 0 else { throw Unavailable(description: "psql: \(result.stderr)") }
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Stops the server (fast shutdown: sessions are cut, as in a restart or a crash of the
    /// database host) or starts it again, on the same port and data.
    public func stop() { _ = try? pgctlDetached(["stop", "-m", "fast", "-w"]) }

    public func start() throws {
        let status = try pgctlDetached(["start", "-w", "-t", "30", "-l", directory + "/log",
                                        "-o", "-p \(port) -k \(directory) -c listen_addresses=\(["127.0.0.1", extraAddress].compactMap { $0 }.joined(separator: ",")) -c fsync=off -c max_connections=300 \(PostgresServer.smallDiskSettings)"])
        guard status == 0 else {
            throw Unavailable(description: "pg_ctl start failed: \((try? String(contentsOfFile: directory + "/log", encoding: .utf8)) ?? "")")
        }
    }

    /// No WAL beyond what crash recovery needs (nothing replicates from a test cluster), and
    /// checkpoints often enough that pg_wal stays near 64 MB instead of growing to 1 GB.
    private static let smallDiskSettings = "-c wal_level=minimal -c max_wal_senders=0 -c max_wal_size=64MB -c min_wal_size=32MB"

    /// pg_ctl with its output in the server's log rather than in pipes (the server it starts
    /// lives on and would hold them), spawned and reaped with plain posix_spawn/waitpid: it may
    /// run from an atexit handler, where Foundation's Process cannot be waited for.
    private func pgctlDetached(_ arguments: [String]) throws -> Int32 {
        let tool = binaries + "/pg_ctl"
        let all = ["-D", directory + "/data"] + arguments
        let argv = getuid() == 0 ? ["/usr/sbin/runuser", "-u", "postgres", "--", tool] + all : [tool] + all
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        for fd: Int32 in [0, 1, 2] {
            posix_spawn_file_actions_addopen(&actions, fd, "/dev/null", fd == 0 ? O_RDONLY : O_WRONLY, 0)
        }
        var cArgs: [UnsafeMutablePointer<CChar>?] = argv.map { strdup($0) } + [nil]
        defer { for p in cArgs { free(p) } }
        var pid: pid_t = 0
        let spawned = posix_spawn(&pid, argv[0], &actions, nil, &cArgs, environ)
        guard spawned == 0 else { throw Unavailable(description: "cannot run \(argv[0]): \(String(cString: strerror(spawned)))") }
        var status: Int32 = 0
        while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
        return (status & 0x7f) == 0 ? (status >> 8) & 0xff : 128 + (status & 0x7f)
    }

    private init(extraAddress: String? = nil, trustedNetwork: String? = nil) throws {
        self.extraAddress = extraAddress
        guard let bin = PostgresServer.findBinaries() else {
            throw Unavailable(description: "no PostgreSQL server binaries in /usr/lib/postgresql (scripts/install-deps.sh installs them)")
        }
        binaries = bin
        directory = NSTemporaryDirectory() + PostgresServer.directoryPrefix + "\(getpid())-\(UInt32.random(in: 0...UInt32.max))"
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        ownerLock = open(directory + "/" + Self.lockName, O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        guard ownerLock >= 0, flock(ownerLock, LOCK_EX | LOCK_NB) == 0 else {
            throw Unavailable(description: "cannot lock \(directory)/\(Self.lockName): \(String(cString: strerror(errno)))")
        }
        if getuid() == 0 { _ = try ChildProcess.run(URL(fileURLWithPath: "/bin/chown"), ["postgres:postgres", directory]) }
        port = Ports.free()
        let initdb = try asServerUser(bin + "/initdb", ["-D", directory + "/data", "-A", "trust", "-U", "postgres", "--no-sync"])
        guard initdb.status == 0 else { throw Unavailable(description: "initdb failed: \(initdb.stderr)") }
        if let trustedNetwork {
            let hba = try FileHandle(forWritingTo: URL(fileURLWithPath: directory + "/data/pg_hba.conf"))
            hba.seekToEndOfFile()
            hba.write(Data("host all all \(trustedNetwork) trust\n".utf8))
            try hba.close()
        }
        try start()
    }

    private func asServerUser(_ tool: String, _ arguments: [String]) throws -> ProcessResult {
        if getuid() == 0 {
            return try ChildProcess.run(URL(fileURLWithPath: "/usr/sbin/runuser"), ["-u", "postgres", "--", tool] + arguments)
        }
        return try ChildProcess.run(URL(fileURLWithPath: tool), arguments)
    }

    private static func findBinaries() -> String? {
        let root = "/usr/lib/postgresql"
        let versions = ((try? FileManager.default.contentsOfDirectory(atPath: root)) ?? []).compactMap(Int.init).sorted()
        return versions.last.map { "\(root)/\($0)/bin" }
    }
}
