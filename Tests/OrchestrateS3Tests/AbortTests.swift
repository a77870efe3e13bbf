import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// A multipart upload whose last attempt fails with a retryable error (every part's connection
/// reset by tools/faultproxy.py) is aborted: the step has failed for good and nothing would
/// continue it, so no part is left on the server, unless keep_parts. Earlier attempts keep it.
@Suite(.serialized) struct AbortTests {
    @Test(arguments: [false, true]) func lastAttemptsRetryableFailureAbortsTheUpload(keepParts: Bool) throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        // Every connection is reset once it has carried 1-2 MiB up: CreateMultipartUpload and
        // the abort get through, no part does.
        let proxy = try FaultProxy(target: "127.0.0.1:\(peer.port)", seed: 7, up: .init(reset: 1.0, after: (1 << 20)...(2 << 20)))
        let runner = S3Runner()
        let source = runner.path("big.bin")
        try Tools.randomFile(source, bytes: 11 << 20)
        let file = runner.workflow("""
            version: 1
            name: s3-last-attempt
            steps:
              up:
                uses: s3.upload
                retry: { max_attempts: 2, initial_interval: 20ms }
                with: { endpoint: "http://\(proxy.address)", bucket: orc-bucket, key: big.bin, source: "\(source)",
                        multipart_threshold: 5242880, part_size: 5242880, concurrency: 2, keep_parts: \(keepParts) }
            """)
        let result = try runner.run(file)
        #expect(result.status != 0)
        let events = S3Runner.events(result.stdout)
        // The first attempt's failure kept the upload for the second, which continued it.
        #expect(events.ofType("step.retrying", step: "up").count == 1, "\(TransferTests.check(result))")
        let failed = try #require(events.ofType("step.failed", step: "up").last)
        #expect(failed["data"]?["kind"]?.stringValue == "retryable", "\(failed)")
        let created = peer.serverLog.components(separatedBy: "big.bin?uploads").count - 1
        #expect(created == 1, "one upload for both attempts: \(peer.serverLog.suffix(2000))")
        #expect(try peer.openUploads("orc-bucket").count == (keepParts ? 1 : 0))
    }
}
