import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// When one part fails, the parts in flight beside it are waited for before the attempt ends:
/// they are confirmed and journaled, so the retry does not send them again (nor race its own
/// earlier requests for the same part numbers).
@Suite struct InFlightTests {
    @Test func siblingsOfAFailedPartAreWaitedForAndKept() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        // The answer to the small last part is lost (the server took it): that part fails at
        // once, while the two big parts are still going up at max_rate.
        let proxy = try ScriptedServer("s3_lost_answer_proxy.py", ["--target", "127.0.0.1:\(peer.port)", "--lose", "^PUT [^?]*\\?partNumber=3&"])
        let runner = S3Runner()
        let source = runner.path("big.bin")
        try Tools.randomFile(source, bytes: 10 * (1 << 20) + 100_000)  // parts of 5 MiB, 5 MiB, 100 KB
        let file = runner.workflow("""
            version: 1
            name: s3-in-flight
            steps:
              up:
                uses: s3.upload
                retry: { max_attempts: 2, initial_interval: 20ms }
                with: { endpoint: "http://\(proxy.address)", bucket: orc-bucket, key: big.bin, source: "\(source)",
                        multipart_threshold: 5242880, part_size: 5242880, concurrency: 3, max_rate: 4194304 }
            """)
        let result = try runner.run(file)
        #expect(result.status == 0, "\(TransferTests.check(result))")
        let events = S3Runner.events(result.stdout)
        #expect(events.ofType("step.retrying", step: "up").count == 1, "\(events.suffix(8))")
        let logs = events.ofType("step.log", step: "up").compactMap { $0["data"]?["message"]?.stringValue }
        #expect(logs.contains { $0.contains("waiting for the 2 request(s) in flight") }, "\(logs)")
        // The retry found all three parts on the server: the two it waited for, and the one
        // whose answer was lost (adopted by its MD5).
        let outputs = try runner.stepOutputs("up")
        #expect(outputs?["parts_resumed"]?.intValue == 3, "\(String(describing: outputs))")
        #expect(peer.partsReceived() == [1: 1, 2: 1, 3: 1], "\(peer.partsReceived())")
        #expect(try peer.openUploads("orc-bucket").isEmpty)
        let cli = runner.path("cli.bin")
        #expect(try peer.aws(["s3api", "get-object", "--bucket", "orc-bucket", "--key", "big.bin", cli]).status == 0)
        #expect(Tools.sameBytes(cli, source))
    }
}
