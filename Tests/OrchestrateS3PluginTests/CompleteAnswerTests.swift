import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// What CompleteMultipartUpload's answer proves: an ETag equal to `md5(part MD5s)-N` of the
/// parts sent vouches for the object (no HEAD after it); an answer with another multipart ETag
/// fails the step; an answer without one is checked by a HEAD (tools/s3_lost_answer_proxy.py
/// `--etag`). moto logs every request, which is how the HEADs are counted.
@Suite struct CompleteAnswerTests {
    static let complete = "^POST [^?]*\\?uploadId="

    /// 11 MiB in three parts of 5 MiB to `endpoint` (moto behind it), key big.bin.
    static func upload(_ runner: S3Runner, endpoint: String, source: String) throws -> ProcessResult {
        try Tools.randomFile(source, bytes: 11 << 20)
        let file = runner.workflow("""
            version: 1
            name: s3-complete-answer
            steps:
              up:
                uses: s3.upload
                with: { endpoint: "\(endpoint)", bucket: orc-bucket, key: big.bin, source: "\(source)",
                        multipart_threshold: 5242880, part_size: 5242880 }
            """)
        return try runner.run(file)
    }

    static func heads(_ peer: S3Peer) -> Int {
        peer.serverLog.split(separator: "\n").filter { $0.contains("\"HEAD /orc-bucket/big.bin ") }.count
    }

    @Test func anAnswerWithTheExpectedETagNeedsNoHead() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let source = runner.path("big.bin")
        let result = try Self.upload(runner, endpoint: peer.endpoint, source: source)
        #expect(result.status == 0, "\(TransferTests.check(result))")
        #expect(peer.serverLog.contains("uploadId="), "moto logs no requests: \(peer.serverLog.suffix(2000))")
        #expect(Self.heads(peer) == 0, "\(peer.serverLog.suffix(3000))")
        let outputs = try runner.stepOutputs("up")
        #expect(outputs?["etag"]?.stringValue?.hasSuffix("-3") == true, "\(String(describing: outputs))")
        let cli = runner.path("cli.bin")
        #expect(try peer.aws(["s3api", "get-object", "--bucket", "orc-bucket", "--key", "big.bin", cli]).status == 0)
        #expect(Tools.sameBytes(cli, source))
    }

    @Test func anAnswerWithAnotherMultipartETagFails() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let lie = "\"" + String(repeating: "0", count: 32) + "-3\""
        let proxy = try ScriptedServer("s3_lost_answer_proxy.py", ["--target", "127.0.0.1:\(peer.port)", "--lose", Self.complete, "--etag", lie])
        let runner = S3Runner()
        let result = try Self.upload(runner, endpoint: "http://\(proxy.address)", source: runner.path("big.bin"))
        #expect(result.status != 0, "\(TransferTests.check(result))")
        let failed = try #require(S3Runner.events(result.stdout).ofType("step.failed", step: "up").last, "\(TransferTests.check(result))")
        #expect(failed["data"]?["code"]?.stringValue == "etag_mismatch", "\(failed)")
    }

    @Test func anAnswerWithoutAnETagIsCheckedByAHead() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let proxy = try ScriptedServer("s3_lost_answer_proxy.py", ["--target", "127.0.0.1:\(peer.port)", "--lose", Self.complete, "--etag", ""])
        let runner = S3Runner()
        let result = try Self.upload(runner, endpoint: "http://\(proxy.address)", source: runner.path("big.bin"))
        #expect(result.status == 0, "\(TransferTests.check(result))")
        #expect(Self.heads(peer) == 1, "\(peer.serverLog.suffix(3000))")
    }
}
