import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// A full disk, for real: a small tmpfs (mounting needs root; CI runs as root). The state
/// directory filling up mid-run is a clear error that leaves the run resumable and the database
/// intact; a destination filling up is a retryable ENOSPC that never leaves a torn destination,
/// and the step finishes once space is back.
@Suite(.serialized) struct DiskFullTests {
    let h = Harness()

    func requireRoot() -> Bool {
        if getuid() != 0 { Issue.record("mounting a small tmpfs needs root: run the suite as root (CI does)") }
        return getuid() == 0
    }

    @Test(.sqliteStoreOnly("fills the disk under the SQLite state file; a PostgreSQL store's disk is the server's"))
    func aFullStateDirectoryStopsTheRunResumablyAndCorruptsNothing() throws {
        guard requireRoot() else { return }
        let disk = try SmallDisk(h.path("state-disk"), size: "48m")
        defer { disk.unmount() }
        let state = "\(disk.path)/state"
        let file = h.workflow("""
            version: 1
            name: journal-heavy
            steps:
              many:
                for_each: [\((0 ..< 3000).map(String.init).joined(separator: ", "))]
                uses: test.echo
                with: { n: "${{ item }}", pad: "\(String(repeating: "x", count: 400))" }
            """)
        // The store exists, then the disk is all but full.
        #expect(try ChildProcess.orchestrate(["list", "--state", state, "--plugin-path", Harness.pluginDir]).status == 0)
        // Room for the run's record (its workflow holds the 3,000-item list; a store with
        // incremental vacuum writes pointer-map pages too), not for its items' journal.
        try disk.fill(leaving: 256 << 10)
        let full = try ChildProcess.orchestrate(["run", file, "--state", state, "--plugin-path", Harness.pluginDir])
        #expect(full.status == 1, "\(full.stdout.suffix(1000))\n\(full.stderr)")
        #expect(!full.signalled, "no crash")
        #expect(full.stderr.contains("full") || full.stderr.contains("SQLITE_FULL"), "a clear error: \(full.stderr)")
        // Space comes back: the database is intact and the run finishes where it stopped.
        try FileManager.default.removeItem(atPath: "\(disk.path)/filler")
        let check = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/sqlite3"), ["\(state)/state.sqlite", "PRAGMA integrity_check"])
        #expect(check.stdout.trimmingCharacters(in: .whitespacesAndNewlines) == "ok")
        let runs = Harness.events(try ChildProcess.orchestrate(["list", "--json", "--state", state, "--plugin-path", Harness.pluginDir]))
        let runID = try #require(runs.first?["id"]?.stringValue, "the run was journaled before the disk filled")
        let resumed = try ChildProcess.orchestrate(["resume", runID, "--state", state, "--plugin-path", Harness.pluginDir])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        let status = try JSONValue(parsing: try ChildProcess.orchestrate(["status", runID, "--json", "--state", state,
                                                                          "--plugin-path", Harness.pluginDir]).stdout)
        #expect(status["status"]?.stringValue == "succeeded")
        let items = status["steps"]?.arrayValue?.filter { $0["kind"]?.stringValue == "item" } ?? []
        #expect(items.count == 3000 && items.allSatisfy { $0["status"]?.stringValue == "succeeded" })
    }

    @Test func aFullDestinationIsRetriedNeverTornAndFinishesOnceSpaceIsBack() throws {
        guard requireRoot() else { return }
        let disk = try SmallDisk(h.path("dest-disk"), size: "2m")
        defer { disk.unmount() }
        let source = h.path("source.bin")
        try Data((0 ..< (5 << 20)).map { UInt8(truncatingIfNeeded: $0 &* 31 &+ 7) }).write(to: URL(fileURLWithPath: source))
        let destination = "\(disk.path)/copy.bin"
        let file = h.workflow("""
            version: 1
            name: copy-to-full-disk
            steps:
              copy:
                uses: fs.copy
                retry: { max_attempts: 200, initial_interval: 200ms, backoff: 1.0 }
                with: { source: "\(source)", destination: "\(destination)" }
            """)
        let run = try h.start(["run", file, "--json"])
        defer { if run.isRunning { kill(run.processIdentifier, SIGKILL) } }
        var runID: String?
        #expect(h.waitFor(30) {
            runID = try? h.runIDs().first
            return runID.flatMap { id in
                (try? h.orchestrate(["events", id]))?.stdout.contains("ENOSPC")
            } ?? false
        }, "the copy hit ENOSPC and is being retried")
        #expect(run.isRunning, "retried, not failed")
        #expect(!FileManager.default.fileExists(atPath: destination), "no torn destination while the disk is full")
        try disk.resize("16m")
        run.waitUntilExit()
        #expect(run.terminationStatus == 0)
        #expect(FileManager.default.contentsEqual(atPath: source, andPath: destination))
        #expect(!FileManager.default.fileExists(atPath: destination + ".partial"))
    }
}

