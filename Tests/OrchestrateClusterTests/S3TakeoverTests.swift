import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import XCTest

/// A worker killed (kill -9 of everything on its machine) in the middle of a multipart S3
/// upload: the other node takes the run over and continues the SAME multipart upload from the
/// parts journaled in the shared PostgreSQL store. Counted at the server (moto's request log):
/// one CreateMultipartUpload, every part received once, the journaled upload id completed.
final class S3TakeoverTests: XCTestCase {
    static let mib = 1 << 20
    static let fileSize = 40 * mib + 999  // 9 parts of 5 MiB
    static let parts = 9

    func testKilledWorkersMultipartUploadIsContinuedByTheOtherNode() throws {
        let cluster = try Cluster(machines: 2)
        defer { cluster.shutdown() }
        let s3 = try LANS3(cluster: cluster)
        defer { s3.stop() }
        let made = try s3.aws(["s3api", "create-bucket", "--bucket", "orc-bucket"])
        XCTAssertEqual(made.status, 0, made.stderr)

        var bytes = Data(count: Self.fileSize)
        bytes.withUnsafeMutableBytes { arc4random_buf($0.baseAddress!, Self.fileSize) }
        let source = cluster.dir.file("movie.bin").path
        try bytes.write(to: URL(fileURLWithPath: source))
        // 6 MiB/s: about 7 s for the whole file, so the kill lands with parts left to send.
        let workflow = cluster.dir.write("s3-upload.yaml", """
            version: 1
            name: s3-takeover
            steps:
              up:
                uses: s3.upload
                with: { endpoint: "\(s3.endpoint)", bucket: orc-bucket, key: movie.bin, source: "\(source)",
                        multipart_threshold: 5242880, part_size: 5242880, concurrency: 2, max_rate: 6291456 }
            """).path
        let environment = LANS3.environment.merging(["ORCHESTRATE_LEASE_SECONDS": "3"]) { $1 }

        try cluster.startWorker(on: 1, environment: environment)
        let run = try cluster.submit(workflow, id: "s3takeover")
        // Killed once the store has journaled at least two confirmed parts.
        var journaled: JSONValue?
        let reached = cluster.waitUntil(60) {
            journaled = try Self.checkpoint(cluster, run: run)
            return (journaled?["parts"]?.arrayValue?.count ?? 0) >= 2
        }
        XCTAssertTrue(reached, "n1 should journal two parts: \(s3.serverLog.suffix(1500))\n\(cluster.workerLogs)")
        guard reached else { return }
        cluster.lan.killAll(on: 1)
        Thread.sleep(forTimeInterval: 0.3)
        journaled = try Self.checkpoint(cluster, run: run)
        let uploadID = try XCTUnwrap(journaled?["upload_id"]?.stringValue, "\(String(describing: journaled))")
        let journaledParts = (journaled?["parts"]?.arrayValue ?? []).compactMap { $0[0]?.intValue }.map(Int.init)
        let atKill = s3.partsReceived()
        XCTAssertLessThan(atKill.count, Self.parts, "the upload finished before the kill")

        try cluster.startWorker(on: 2, environment: environment)
        let finished = cluster.waitUntil(60) { try cluster.scalar("SELECT status FROM runs WHERE id = '\(run)'") == "succeeded" }
        XCTAssertTrue(finished, "n2 should finish the run: \((try? cluster.rows("SELECT id, status, owner_node, error FROM runs")) ?? [])\n\(cluster.workerLogs)")
        XCTAssertEqual(try cluster.scalar("SELECT count(*) FROM events WHERE run_id = '\(run)' AND type = 'run.taken_over' AND data_json LIKE '%\"node\":\"n2\"%'"), "1")
        XCTAssertEqual(try cluster.scalar("SELECT node FROM steps WHERE run_id = '\(run)' AND step = 'up'"), "n2")

        // The same multipart upload, continued: created once, completed under the journaled id,
        // no part received twice (the journaled ones were not sent again), every part there.
        let created = s3.answered("POST").filter { $0.contains("?uploads") }
        XCTAssertEqual(created.count, 1, "one CreateMultipartUpload: \(created)")
        let completed = s3.answered("POST").filter { $0.contains("uploadId=") }
        XCTAssertEqual(completed.count, 1, "\(completed)")
        XCTAssertTrue(completed.allSatisfy { $0.contains("uploadId=\(uploadID)") }, "the journaled upload \(uploadID) was completed: \(completed)")
        let received = s3.partsReceived()
        XCTAssertEqual(received.keys.sorted(), Array(1...Self.parts), "\(received)")
        XCTAssertTrue(received.values.allSatisfy { $0 == 1 }, "a part was received twice: \(received) (journaled at the kill: \(journaledParts))")
        let outputs = try JSONValue(parsing: try cluster.orchestrate(["status", run, "--json"]).stdout)["steps"]?.arrayValue?
            .first { $0["id"]?.stringValue == "up" }?["outputs"]
        XCTAssertGreaterThanOrEqual(outputs?["parts_resumed"]?.intValue ?? 0, Int64(journaledParts.count), "\(String(describing: outputs))")

        XCTAssertEqual(try s3.openUploads("orc-bucket"), [], "no multipart upload left open")
        let back = cluster.dir.file("back.bin").path
        let fetched = try s3.aws(["s3api", "get-object", "--bucket", "orc-bucket", "--key", "movie.bin", back])
        XCTAssertEqual(fetched.status, 0, fetched.stderr)
        XCTAssertEqual(FileManager.default.contents(atPath: back), bytes, "the object is byte-identical to the file")
    }

    /// The upload step's checkpoint as the store holds it.
    static func checkpoint(_ cluster: Cluster, run: String) throws -> JSONValue? {
        let text = try cluster.scalar("SELECT convert_from(data, 'UTF8') FROM checkpoints WHERE run_id = '\(run)' AND step_id = 'up'")
        return text.isEmpty ? nil : try JSONValue(parsing: text)
    }
}
