import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// A multipart upload survives kill -9 (resume continues the same upload, no part is received
/// twice, nothing stays open), and a cancel aborts it unless keep_parts.
@Suite(.serialized) struct ResumeTests {
    static let mib = 1 << 20

    static func uploadWorkflow(_ peer: S3Peer, file: String, keepParts: Bool = false) -> String {
        TransferTests.workflow(peer, """
              up:
                uses: s3.upload
                retry: { max_attempts: 1 }
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: movie.bin, source: "\(file)", multipart_threshold: 5242880,
                        part_size: 5242880, concurrency: 2, max_rate: 6291456, keep_parts: \(keepParts) }
            """)
    }

    @Test func killNineMidMultipartThenResumeSendsNoPartTwice() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let source = runner.path("movie.bin")
        try Tools.randomFile(source, bytes: 40 * Self.mib + 999)  // 9 parts
        let file = runner.workflow(Self.uploadWorkflow(peer, file: source))
        let child = try runner.start(file)
        let reached = Tools.waitFor(60) { peer.partsReceived().count >= 3 }
        kill(child.pid, SIGKILL)
        _ = child.wait(timeout: 10)
        #expect(reached, "\(peer.serverLog.suffix(2000))")
        let atKill = peer.partsReceived()
        #expect(atKill.count < 9, "the upload finished before the kill")
        let run = try #require(try runner.runIDs().last)

        let resumed = try runner.orchestrate(["resume", run, "--json"])
        #expect(resumed.status == 0, "\(TransferTests.check(resumed))")
        let received = peer.partsReceived()
        #expect(received.keys.sorted() == Array(1 ... 9), "\(received)")
        #expect(received.values.allSatisfy { $0 == 1 }, "a part was received twice: \(received)")
        let outputs = try runner.stepOutputs("up")
        #expect((outputs?["parts_resumed"]?.intValue ?? 0) >= Int64(atKill.count), "\(String(describing: outputs))")
        #expect(try peer.openUploads("orc-bucket").isEmpty)
        let back = runner.path("back.bin")
        #expect(try peer.aws(["s3api", "get-object", "--bucket", "orc-bucket", "--key", "movie.bin", back]).status == 0)
        #expect(Tools.sameBytes(back, source))
    }

    func cancelMidMultipart(keepParts: Bool) throws -> (peer: S3Peer, events: [JSONValue]) {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let source = runner.path("movie.bin")
        try Tools.randomFile(source, bytes: 30 * Self.mib)
        let child = try runner.start(runner.workflow(Self.uploadWorkflow(peer, file: source, keepParts: keepParts)))
        let reached = Tools.waitFor(60) { peer.partsReceived().count >= 1 }
        #expect(reached)
        // `cancel` reaches the live owner through the store (a Ctrl-C would only interrupt it).
        let run = try #require(try runner.runIDs().last)
        let cancelled = try runner.orchestrate(["cancel", run])
        #expect(cancelled.status == 0, "\(TransferTests.check(cancelled))")
        let status = child.wait(timeout: 30)
        #expect(status == 1, "a cancelled run exits 1")
        let events = S3Runner.events((try? String(contentsOfFile: runner.path("events.jsonl"), encoding: .utf8)) ?? "")
        #expect(!events.ofType("step.cancelled", step: "up").isEmpty, "\(events.suffix(5))")
        return (peer, events)
    }

    @Test func cancelAbortsTheMultipartUpload() throws {
        let (peer, _) = try cancelMidMultipart(keepParts: false)
        #expect(try peer.openUploads("orc-bucket").isEmpty, "the cancelled upload was left open")
    }

    @Test func cancelWithKeepPartsLeavesTheUploadOpen() throws {
        let (peer, _) = try cancelMidMultipart(keepParts: true)
        #expect(try peer.openUploads("orc-bucket").count == 1)
    }
}
