import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import XCTest

/// Machines lost in the middle of Vimeo uploads (workflows/vimeo-upload.yaml against the
/// sandbox, bandwidth-capped so the transfers are slow): one killed (kill -9 of everything on
/// it), one cut off the network for longer than its lease and then healed. The third takes their
/// runs over and finishes them: one video per idempotency key, every video byte-identical, the
/// killed machine's exports redone and uploads resumed from the server's offset, and nothing
/// written by any machine to a run it did not hold a valid lease on (database triggers log every
/// machine's writes, so the check does not depend on the journal the product writes itself).
final class TakeoverTests: XCTestCase {
    static let lease = 3.0
    static let runs = 9
    static let fileSize = 256 << 10
    static let maxRate = 64 << 10

    func testKilledAndPartitionedWorkersLoseTheirRunsWhichFinishOnceOnTheSurvivor() throws {
        let cluster = try Cluster(machines: 3)
        defer { cluster.shutdown() }
        let sandbox = try LANSandbox(cluster: cluster)
        defer { sandbox.stop() }
        let environment = ["ORCHESTRATE_LEASE_SECONDS": "\(TakeoverTests.lease)", "VIMEO_TOKEN": "sandbox-token"]

        // n1 and n2 take three runs each; n3, started once they hold them, takes the other three
        // and has room for all six it will take over (a survivor without room would leave lost
        // runs unclaimed, for the healed n2 to claim back).
        for index in 1...2 { try cluster.startWorker(on: index, arguments: ["--max-parallel", "3"], environment: environment) }
        XCTAssertTrue(cluster.waitUntil(20) { try cluster.scalar("SELECT count(*) FROM events WHERE type = 'worker.started'") == "2" },
                      cluster.workerLogs)
        try WriteLog.install(in: cluster)

        let workflow = TestPaths.packageRoot.appendingPathComponent("workflows/vimeo-upload.yaml").path
        var sources: [String: Data] = [:]
        for index in 1...TakeoverTests.runs {
            let id = "video\(index)"
            var bytes = Data(count: TakeoverTests.fileSize)
            bytes.withUnsafeMutableBytes { arc4random_buf($0.baseAddress!, TakeoverTests.fileSize) }
            let path = cluster.dir.file("\(id).bin").path
            try bytes.write(to: URL(fileURLWithPath: path))
            sources[id] = bytes
            _ = try cluster.submit(workflow, inputs: ["source": path, "api": sandbox.url, "title": id,
                                                      "max_rate": "\(TakeoverTests.maxRate)"], id: id)
        }
        XCTAssertTrue(cluster.waitUntil(20) {
            try cluster.scalar("SELECT count(*) FROM runs WHERE owner_node IN ('n1', 'n2') AND status = 'running'") == "6"
        }, "n1 and n2 should hold three runs each: \((try? cluster.rows("SELECT id, status, owner_node FROM runs")) ?? [])")
        try cluster.startWorker(on: 3, arguments: ["--max-parallel", "\(TakeoverTests.runs)"], environment: environment)

        // The victim is whichever of n1 and n2 is caught with an upload under way: one that
        // started 1 to 2 s ago (a file takes fileSize / maxRate = 4 s), so bytes have reached the
        // server and more are to come when the kill lands. Neither the journal (the plugin's
        // progress under a rate cap comes late) nor the sandbox (it publishes its offset every
        // MiB and when a body ends) can tell live. The other machine is cut off.
        var victim = 0
        let midTransfer = cluster.waitUntil(40) {
            let node = try cluster.scalar("""
                SELECT node FROM steps WHERE node IN ('n1', 'n2') AND step = 'upload' AND status = 'running'
                  AND started_at BETWEEN extract(epoch FROM clock_timestamp()) - 2 AND extract(epoch FROM clock_timestamp()) - 1
                LIMIT 1
                """)
            victim = node == "n1" ? 1 : node == "n2" ? 2 : 0
            return victim != 0
        }
        XCTAssertTrue(midTransfer, """
            n1 or n2 should be caught mid-upload: \((try? cluster.rows("SELECT run_id, step, node, status FROM steps WHERE status = 'running'")) ?? [])
            \((try? sandbox.videos()) ?? [])
            \(cluster.workerLogs)
            """)
        guard midTransfer else { return }
        let cut = 3 - victim
        cluster.lan.killAll(on: victim)
        try cluster.lan.partition(cut)
        // What the victim's interrupted uploads had delivered, and the last moment the cut-off
        // machine's leases (runs and concurrency slots) were good for: it can renew nothing now.
        Thread.sleep(forTimeInterval: 0.3)
        let killedRuns = Set(try cluster.rows("SELECT id FROM runs WHERE owner_node = 'n\(victim)' AND status IN ('queued', 'running')").map { $0[0] })
        let partitionedRuns = Set(try cluster.rows("SELECT id FROM runs WHERE owner_node = 'n\(cut)' AND status IN ('queued', 'running')").map { $0[0] })
        var offsetsAtKill: [String: Int64] = [:]
        for run in killedRuns { offsetsAtKill[run] = try sandbox.videoFor(runID: run, cluster: cluster)?["received"]?.intValue ?? 0 }
        // Runs whose export (a file in the victim's run directory) an unfinished upload still needs.
        let exportedBeforeKill = Set(try cluster.rows("""
            SELECT e.run_id FROM steps e JOIN steps u ON u.run_id = e.run_id AND u.step = 'upload'
            WHERE e.node = 'n\(victim)' AND e.step = 'export' AND e.status = 'succeeded' AND u.status <> 'succeeded'
            """).map { $0[0] }).intersection(killedRuns)
        let cutLeaseEnd = max(Double(try cluster.scalar("SELECT coalesce(max(lease_until), 0) FROM runs WHERE owner_node = 'n\(cut)'")) ?? 0,
                              Double(try cluster.scalar("SELECT coalesce(max(expires_at), 0) FROM leases WHERE owner_node = 'n\(cut)'")) ?? 0)
        XCTAssertGreaterThan(cutLeaseEnd, 0)
        XCTAssertFalse(killedRuns.isEmpty); XCTAssertFalse(partitionedRuns.isEmpty)
        let lost = killedRuns.union(partitionedRuns)
        let lostList = lost.map { "'\($0)'" }.joined(separator: ",")

        // Keep the machine cut off well past its lease and until n3 has taken every lost run
        // over, then heal it: it must not write for the runs it lost.
        XCTAssertTrue(cluster.waitUntil(40) {
            try cluster.databaseNow() > cutLeaseEnd + TakeoverTests.lease + 1
                && cluster.scalar("SELECT count(DISTINCT run_id) FROM events WHERE type = 'run.taken_over' AND run_id IN (\(lostList))") == "\(lost.count)"
        }, "n3 should take over \(lost.sorted()): \((try? cluster.rows("SELECT id, status, owner_node FROM runs")) ?? [])\n\(cluster.workerLogs)")
        try cluster.lan.heal(cut)
        let healedAt = try cluster.databaseNow()

        let finished = cluster.waitUntil(90) { try cluster.runStatuses()["succeeded"] == TakeoverTests.runs }
        XCTAssertTrue(finished, "every run should finish: \((try? cluster.rows("SELECT id, status, owner_node, error FROM runs")) ?? [])\n\(cluster.workerLogs)")
        // Give the healed machine time to write whatever a broken fence would let through.
        Thread.sleep(forTimeInterval: max(0, healedAt + TakeoverTests.lease - (try cluster.databaseNow())))

        // One video per run (per idempotency key), each byte-identical to its source.
        let videos = try sandbox.videos()
        let keys = videos.compactMap { $0["idempotency_key"]?.stringValue }
        XCTAssertEqual(videos.count, TakeoverTests.runs, "one video per run: \(keys)")
        XCTAssertEqual(Set(keys).count, TakeoverTests.runs)
        for (id, bytes) in sources {
            guard let video = try sandbox.videoFor(runID: id, cluster: cluster), let uri = video["uri"]?.stringValue else {
                XCTFail("run \(id) has no video"); continue
            }
            XCTAssertEqual(FileManager.default.contents(atPath: sandbox.videoFile(uri)), bytes, "video of \(id) is byte-identical")
            XCTAssertEqual(video["activated"]?.boolValue, true, "\(id)")
        }

        // Takeover: each lost run moved once, by a run.taken_over event, to the survivor n3.
        for run in lost {
            XCTAssertEqual(try cluster.rows("SELECT data_json FROM events WHERE run_id = '\(run)' AND type = 'run.taken_over'").count, 1, run)
            XCTAssertEqual(try cluster.scalar("""
                SELECT count(*) FROM events WHERE run_id = '\(run)' AND type = 'run.taken_over' AND data_json LIKE '%"node":"n3"%'
                """), "1", "\(run) taken over by n3")
        }

        // The victim's exports lived in its run directory: redone on n3 (step.redone), and the
        // upload resumed from the server's offset rather than re-sending from byte 0.
        XCTAssertFalse(exportedBeforeKill.isEmpty, "n\(victim) was killed after some export finished")
        for run in exportedBeforeKill {
            XCTAssertEqual(try cluster.scalar("SELECT count(*) FROM events WHERE run_id = '\(run)' AND type = 'step.redone' AND step = 'export'"), "1",
                           "export of \(run) redone on the new node")
            XCTAssertEqual(try cluster.scalar("SELECT node FROM steps WHERE run_id = '\(run)' AND step = 'export'"), "n3")
            let offset = offsetsAtKill[run] ?? 0
            let total = try sandbox.videoFor(runID: run, cluster: cluster)?["bytes_received_total"]?.intValue ?? 0
            if offset > 0 {
                XCTAssertLessThan(total, Int64(TakeoverTests.fileSize) + offset,
                                  "the upload of \(run) resumed at the server's offset \(offset), not from 0")
            }
        }

        // Fencing. The write log: no machine wrote a row of a run it did not hold a valid lease
        // on, and the cut-off machine wrote nothing for its lost runs once its lease had ended
        // (not while cut off, and not once healed).
        XCTAssertGreaterThan(healedAt, cutLeaseEnd + TakeoverTests.lease, "the partition outlasted the lease")
        XCTAssertEqual(try WriteLog.unheld(in: cluster), [], "writes to runs the writer held no valid lease on")
        XCTAssertEqual(try cluster.rows("""
            SELECT node, tbl, run_id, at FROM machine_writes WHERE node = 'n\(cut)' AND at > \(cutLeaseEnd) AND run_id IN (\(lostList))
            """), [], "n\(cut) wrote to its lost runs after its lease ended")
        // And from the journal: no step of a lost run attributed to the cut-off machine started or
        // finished after its lease, and none succeeded twice after the takeover.
        for run in partitionedRuns {
            let takenOver = try cluster.scalar("SELECT min(seq) FROM events WHERE run_id = '\(run)' AND type = 'run.taken_over'")
            XCTAssertEqual(try cluster.scalar("""
                SELECT count(*) FROM steps WHERE run_id = '\(run)' AND node = 'n\(cut)'
                  AND (started_at > \(cutLeaseEnd) OR finished_at > \(cutLeaseEnd))
                """), "0", "steps of \(run) written by n\(cut) after its lease ended")
            XCTAssertEqual(try cluster.scalar("""
                SELECT count(*) FROM (SELECT step FROM events WHERE run_id = '\(run)' AND seq > \(takenOver)
                  AND type = 'step.succeeded' GROUP BY step HAVING count(*) > 1) AS twice
                """), "0", "a step of \(run) succeeded twice after the takeover")
        }
    }
}
