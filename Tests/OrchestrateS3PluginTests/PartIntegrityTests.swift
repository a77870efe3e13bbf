import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// What a multipart upload's parts carry, and what happens to one damaged on the way
/// (tools/s3_lost_answer_proxy.py `--headers`, `--corrupt`; moto behind it, which checks
/// neither the signed payload hash nor the part's checksum, as `rclone serve s3` does not).
@Suite struct PartIntegrityTests {
    static let part2 = "^PUT [^?]*\\?partNumber=2&"

    /// 11 MiB in three parts of 5 MiB through `proxy`, two attempts; the object read back.
    static func upload(_ runner: S3Runner, proxy: ScriptedServer, peer: S3Peer) throws -> (result: ProcessResult, same: Bool) {
        let source = runner.path("big.bin")
        try Tools.randomFile(source, bytes: 11 << 20)
        let file = runner.workflow("""
            version: 1
            name: s3-part-integrity
            steps:
              up:
                uses: s3.upload
                retry: { max_attempts: 2, initial_interval: 20ms }
                with: { endpoint: "http://\(proxy.address)", bucket: orc-bucket, key: big.bin, source: "\(source)",
                        multipart_threshold: 5242880, part_size: 5242880 }
            """)
        let result = try runner.run(file)
        let cli = runner.path("cli.bin")
        let read = try peer.aws(["s3api", "get-object", "--bucket", "orc-bucket", "--key", "big.bin", cli])
        return (result, read.status == 0 && Tools.sameBytes(cli, source))
    }

    /// Each part is checked by its SHA-256 (signed, and as `x-amz-checksum-sha256`) and by the
    /// ETag the server answers; no Content-MD5 goes with it (a server that checks one hashes
    /// the part a second time).
    @Test func partsCarryTheirSHA256AndNoContentMD5() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let log = runner.path("headers.log")
        let proxy = try ScriptedServer("s3_lost_answer_proxy.py",
                                       ["--target", "127.0.0.1:\(peer.port)", "--lose", "^NOTHING ", "--headers", log])
        let (result, same) = try Self.upload(runner, proxy: proxy, peer: peer)
        #expect(result.status == 0, "\(TransferTests.check(result))")
        #expect(same)
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        let parts = text.split(separator: "\n").filter { $0.hasPrefix("PUT ") && $0.contains("partNumber=") }
        #expect(parts.count == 3, "\(text)")
        for line in parts {
            let names = Set(line.split(separator: " ").dropFirst(2).map(String.init))
            #expect(names.contains("x-amz-checksum-sha256") && names.contains("x-amz-content-sha256"), "\(line)")
            #expect(!names.contains("content-md5"), "\(line)")
        }
    }

    /// A part whose bytes changed on the way is stored by a server that checks no checksum; its
    /// ETag is not the part's MD5: the attempt fails retryably, and the next one compares the
    /// part ListParts shows (its digests asked for a second time), sends it again, and the
    /// object is whole.
    @Test func aPartDamagedOnTheWayIsSentAgain() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let log = runner.path("headers.log")
        let proxy = try ScriptedServer("s3_lost_answer_proxy.py",
                                       ["--target", "127.0.0.1:\(peer.port)", "--lose", Self.part2, "--corrupt", "--headers", log])
        let (result, same) = try Self.upload(runner, proxy: proxy, peer: peer)
        #expect(result.status == 0, "\(TransferTests.check(result))")
        let retries = S3Runner.events(result.stdout).ofType("step.retrying")
        #expect(retries.count == 1 && retries.first?["data"]?["code"]?.stringValue == "etag_mismatch", "\(retries)")
        #expect(same)
        let text = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        let sent = text.split(separator: "\n").filter { $0.hasPrefix("PUT ") && $0.contains("partNumber=") }
        #expect(sent.filter { $0.contains("partNumber=2&") }.count == 2 && sent.count == 4, "\(text)")
    }
}
