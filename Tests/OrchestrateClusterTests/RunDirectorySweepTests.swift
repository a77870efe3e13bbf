import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import XCTest

/// Retention on PostgreSQL with two machines: a run executed by n2 and pruned by n1 loses its
/// run directory on n2 too (n2's sweep), while n2's other directories stay: a run kept by its
/// retention, a link planted where a pruned run's directory was, a folder of another store.
final class RunDirectorySweepTests: XCTestCase {
    func testARunPrunedByOneNodeLosesItsDirectoryOnTheNodeThatRanIt() throws {
        let cluster = try Cluster(machines: 2)
        defer { cluster.shutdown() }
        func workflow(_ name: String, retention: String? = nil) -> String {
            cluster.dir.write(name + ".yaml", """
                version: 1
                name: \(name)
                \(retention.map { "retention: \($0)" } ?? "")
                steps:
                  write:
                    uses: test.append
                    with: { file: "${{ run.dir }}/frame_0001.dpx", line: "frame" }
                """).path
        }
        let runs = cluster.dir.file("node2/runs").path
        let outside = cluster.dir.file("outside").path
        try FileManager.default.createDirectory(atPath: outside, withIntermediateDirectories: true)
        try Data("keep".utf8).write(to: URL(fileURLWithPath: outside + "/keep.txt"))

        // n2 executes the runs and never prunes; n1 prunes and serves another queue.
        let environment = ["ORCHESTRATE_PRUNE_INTERVAL": "0.3"]
        try cluster.startWorker(on: 2, arguments: ["--no-prune"], environment: environment)
        let pruned = try cluster.submit(workflow("pruned"))
        let linked = try cluster.submit(workflow("linked"))
        let kept = try cluster.submit(workflow("kept", retention: "off"))
        let ran = cluster.waitUntil(60) { try cluster.runStatuses()["succeeded"] == 3 }
        XCTAssertTrue(ran, "n2 should run all three: \((try? cluster.runStatuses()) ?? [:])\n\(cluster.workerLogs)")
        XCTAssertEqual(try cluster.scalar("SELECT count(*) FROM steps WHERE node = 'n2' AND status = 'succeeded'"), "3")
        for id in [pruned, linked, kept] {
            XCTAssertTrue(FileManager.default.fileExists(atPath: "\(runs)/\(id)/frame_0001.dpx"), id)
        }
        // The engine named the store in n2's runs folder before its first directory there.
        let storeID = try cluster.scalar("SELECT value FROM queue_state WHERE key = 'store_id'")
        XCTAssertEqual(storeID.count, 36)
        XCTAssertEqual(try String(contentsOfFile: runs + "/.orchestrate-stores", encoding: .utf8), storeID + "\n")
        // A link planted where a run's directory was: it stays, and so does what it points to.
        try FileManager.default.removeItem(atPath: "\(runs)/\(linked)")
        try FileManager.default.createSymbolicLink(atPath: "\(runs)/\(linked)", withDestinationPath: outside)

        XCTAssertEqual(try cluster.orchestrate(["queue", "retention", "1s"]).status, 0)
        Thread.sleep(forTimeInterval: 1.2)
        try cluster.startWorker(on: 1, queue: "elsewhere", environment: environment)
        let prunedByN1 = cluster.waitUntil(30) { try cluster.rows("SELECT id FROM runs").map { $0[0] } == [kept] }
        XCTAssertTrue(prunedByN1, "n1 should prune the two runs\n\(cluster.workerLogs)")
        XCTAssertTrue((try String(contentsOfFile: cluster.log(1, "err"), encoding: .utf8)).contains("retention: pruned"),
                      cluster.workerLogs)

        let swept = cluster.waitUntil(30) { !FileManager.default.fileExists(atPath: "\(runs)/\(pruned)") }
        XCTAssertTrue(swept, "n2 should remove the pruned run's directory\n\(cluster.workerLogs)")
        // The log line follows the removal (and serve's log is written by a thread of its own).
        let said = cluster.waitUntil(10) {
            ((try? String(contentsOfFile: cluster.log(2, "err"), encoding: .utf8)) ?? "")
                .contains("removed 1 run directory(ies) of runs no longer in the store: \(pruned)")
        }
        XCTAssertTrue(said, cluster.workerLogs)
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(runs)/\(kept)/frame_0001.dpx"), "a kept run's directory stays")
        var info = stat()
        XCTAssertEqual(lstat("\(runs)/\(linked)", &info), 0, "the planted link stays")
        XCTAssertTrue(FileManager.default.fileExists(atPath: outside + "/keep.txt"))

        // n2's folder now shared with another store: n2 leaves it alone, and says so once.
        try FileManager.default.removeItem(atPath: "\(runs)/\(linked)")
        let handle = try FileHandle(forWritingTo: URL(fileURLWithPath: runs + "/.orchestrate-stores"))
        try handle.seekToEnd()
        try handle.write(contentsOf: Data("0b5e7a11-0000-4000-8000-000000000000\n".utf8))
        try handle.close()
        let other = try cluster.submit(workflow("other"))
        let otherPruned = cluster.waitUntil(30) {
            try cluster.scalar("SELECT count(*) FROM events WHERE type = 'runs.pruned' AND data_json LIKE '%\(other)%'") == "1"
        }
        XCTAssertTrue(otherPruned, cluster.workerLogs)
        let refused = cluster.waitUntil(10) {
            ((try? String(contentsOfFile: cluster.log(2, "err"), encoding: .utf8)) ?? "").contains("holds run directories of 2 stores")
        }
        XCTAssertTrue(refused, cluster.workerLogs)
        Thread.sleep(forTimeInterval: 1)
        XCTAssertTrue(FileManager.default.fileExists(atPath: "\(runs)/\(other)/frame_0001.dpx"),
                      "a folder shared with another store is left alone")
    }
}
