import Foundation
import OrchestrateTestSupport
import Testing

/// A test process that crashes cannot stop and delete its throwaway PostgreSQL cluster; the
/// next test process must, or a few runs of the suite fill the disk (a CI run failed that way).
/// What decides is the flock on the cluster's `owner.lock`, not the process id in its name.
@Suite struct AbandonedClusterTests {
    @Test func aClusterNobodyOwnsIsStoppedAndDeletedAndAnOwnedOneIsLeft() throws {
        let server = try PostgresServer.dedicated()
        let postmaster = try Self.postmasterPID(server.directory)
        // What a crash leaves: the lock let go, the server running.
        server.releaseOwnership()
        let abandoned = NSTemporaryDirectory() + "orchestrate-pg-\(getpid())-\(UInt32.random(in: 0 ... UInt32.max))"
        try FileManager.default.moveItem(atPath: server.directory, toPath: abandoned)
        defer { try? FileManager.default.removeItem(atPath: abandoned) }
        #expect(kill(postmaster, 0) == 0)

        // Owned (its lock held here), though the id in its name is of a process that ended.
        let gone = try Process.run(URL(fileURLWithPath: "/bin/true"), arguments: [])
        gone.waitUntilExit()
        let owned = NSTemporaryDirectory() + "orchestrate-pg-\(gone.processIdentifier)-1"
        try FileManager.default.createDirectory(atPath: owned, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: owned) }
        let lock = open(owned + "/owner.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0o600)
        #expect(lock >= 0 && flock(lock, LOCK_EX | LOCK_NB) == 0)
        defer { close(lock) }

        PostgresServer.removeAbandonedClusters()
        #expect(!FileManager.default.fileExists(atPath: abandoned))
        // pg_ctl's wait ends when the server removes postmaster.pid, a moment before it exits.
        let deadline = Date().addingTimeInterval(10)
        while kill(postmaster, 0) == 0 && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(kill(postmaster, 0) != 0, "the abandoned cluster's server is still running")
        #expect(FileManager.default.fileExists(atPath: owned), "an owned cluster was deleted")
    }

    /// The server's process id: the first line of `postmaster.pid`.
    static func postmasterPID(_ directory: String) throws -> pid_t {
        let text = try String(contentsOfFile: directory + "/data/postmaster.pid", encoding: .utf8)
        return try #require(text.split(separator: "\n").first.flatMap { pid_t($0) })
    }
}
