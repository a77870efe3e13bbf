import Foundation
import OrchestrateTestSupport
import Testing

/// A test process that crashes cannot stop and delete its throwaway PostgreSQL cluster; the
/// next test process must, or a few runs of the suite fill the disk (a CI run failed that way).
@Suite struct AbandonedClusterTests {
    @Test func aClusterWhoseTestProcessIsGoneIsStoppedAndDeleted() throws {
        let server = try PostgresServer.dedicated()
        let postmaster = try Self.postmasterPID(server.directory)
        // Pose as the cluster of a process that has ended: the id of a child we reaped.
        let gone = try Process.run(URL(fileURLWithPath: "/bin/true"), arguments: [])
        gone.waitUntilExit()
        let abandoned = NSTemporaryDirectory() + "orchestrate-pg-\(gone.processIdentifier)-1"
        try FileManager.default.moveItem(atPath: server.directory, toPath: abandoned)
        defer { try? FileManager.default.removeItem(atPath: abandoned) }
        #expect(kill(postmaster, 0) == 0)

        let ours = NSTemporaryDirectory() + "orchestrate-pg-\(getpid())-1"
        try FileManager.default.createDirectory(atPath: ours, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: ours) }

        PostgresServer.removeAbandonedClusters()
        #expect(!FileManager.default.fileExists(atPath: abandoned))
        // pg_ctl's wait ends when the server removes postmaster.pid, a moment before it exits.
        let deadline = Date().addingTimeInterval(10)
        while kill(postmaster, 0) == 0 && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(kill(postmaster, 0) != 0, "the abandoned cluster's server is still running")
        #expect(FileManager.default.fileExists(atPath: ours), "a running process's cluster was deleted")
    }

    /// The server's process id: the first line of `postmaster.pid`.
    static func postmasterPID(_ directory: String) throws -> pid_t {
        let text = try String(contentsOfFile: directory + "/data/postmaster.pid", encoding: .utf8)
        return try #require(text.split(separator: "\n").first.flatMap { pid_t($0) })
    }
}
