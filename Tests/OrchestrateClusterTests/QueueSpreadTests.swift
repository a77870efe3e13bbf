import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import XCTest

/// Three workers on three machines share one queue on PostgreSQL: every run executes exactly
/// once, none is left behind, and each machine does a fair share.
final class QueueSpreadTests: XCTestCase {
    func testThreeWorkersShareThreeHundredRunsEachExecutedOnce() throws {
        let cluster = try Cluster(machines: 3)
        defer { cluster.shutdown() }
        let log = cluster.dir.file("executed.log").path
        // The file system is shared by the namespaces: every execution of `record` appends its
        // run id to one file, so a run executed twice (or never) shows there.
        let workflow = cluster.dir.write("spread.yaml", """
            version: 1
            name: spread
            inputs:
              log: { type: string, required: true }
            steps:
              work:
                uses: test.sleep
                with: { ms: 40 }
              record:
                needs: [work]
                uses: test.append
                with: { file: "${{ inputs.log }}", line: "${{ run.id }}" }
            """).path
        for index in 1...3 { try cluster.startWorker(on: index) }
        let started = cluster.waitUntil(20) {
            Int(try cluster.scalar("SELECT count(*) FROM events WHERE type = 'worker.started'")) == 3
        }
        XCTAssertTrue(started, "three workers should start\n\(cluster.workerLogs)")

        let begin = Date()
        let ids = try cluster.submitBatch(workflow, count: 300, inputs: ["log": log])
        XCTAssertEqual(Set(ids).count, 300)
        let finished = cluster.waitUntil(180) { try cluster.runStatuses()["succeeded"] == 300 }
        let elapsed = Date().timeIntervalSince(begin)
        XCTAssertTrue(finished, "all 300 runs should succeed; statuses: \((try? cluster.runStatuses()) ?? [:])\n\(cluster.workerLogs)")

        let executed = ((try? String(contentsOfFile: log, encoding: .utf8)) ?? "").split(separator: "\n").map(String.init)
        var executions: [String: Int] = [:]
        for id in executed { executions[id, default: 0] += 1 }
        XCTAssertEqual(Set(executions.keys), Set(ids), "every submitted run, and only those, executed")
        XCTAssertEqual(executions.values.filter { $0 != 1 }.count, 0,
                       "runs executed more than once: \(executions.filter { $0.value != 1 })")

        // Which node executed each run, from the journal: a fair share each (a third is 100; a
        // worker that took nothing, or nearly all, fails this).
        var perNode: [String: Int] = [:]
        for row in try cluster.rows("SELECT node, count(*) FROM steps WHERE step = 'record' AND status = 'succeeded' GROUP BY node") {
            perNode[row[0]] = Int(row[1]) ?? 0
        }
        XCTAssertEqual(perNode.values.reduce(0, +), 300)
        for node in ["n1", "n2", "n3"] {
            XCTAssertGreaterThanOrEqual(perNode[node] ?? 0, 50, "node \(node) should run a fair share: \(perNode)")
        }
        // The same, as a user sees it: `status --json` names the node of each step.
        let status = try cluster.orchestrate(["status", ids[0], "--json"])
        let document = try JSONValue(parsing: status.stdout)
        let stepNodes = (document["steps"]?.arrayValue ?? []).compactMap { $0["node"]?.stringValue }
        XCTAssertEqual(stepNodes.count, 2, "status --json shows each step's node: \(status.stdout)")
        XCTAssertTrue(stepNodes.allSatisfy { ["n1", "n2", "n3"].contains($0) }, "\(stepNodes)")
        print("cluster: 300 runs on 3 workers in \(String(format: "%.1f", elapsed)) s, per node \(perNode)")
    }
}
