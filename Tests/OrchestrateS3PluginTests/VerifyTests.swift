import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// A ranged download's end-to-end check: the SHA-256 is computed while the ranges arrive (the
/// written prefix hashed on another thread), and still compared with the object's
/// `x-amz-meta-sha256` before the rename.
@Suite struct VerifyTests {
    /// An object whose metadata names another SHA-256 than its bytes': the download fails
    /// permanently, and neither the destination nor the partial file is left behind.
    @Test func aRangedDownloadWhoseBytesAreNotTheMetadataSHA256Fails() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let source = runner.path("src.bin")
        try Tools.randomFile(source, bytes: 9 * (1 << 20) + 777)  // 10 ranges of 1 MiB, the last short
        let wrong = String(repeating: "ab", count: 32)
        #expect(try peer.aws(["s3api", "put-object", "--bucket", "orc-bucket", "--key", "big.bin", "--body", source,
                              "--metadata", "sha256=\(wrong)"]).status == 0)
        let destination = runner.path("out/big.bin")
        let file = runner.workflow(TransferTests.workflow(peer, """
              get:
                uses: s3.download
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: big.bin, destination: "\(destination)", part_size: 1048576,
                        concurrency: 3 }
            """))
        let result = try runner.run(file)
        #expect(result.status != 0, "\(TransferTests.check(result))")
        let failed = try #require(S3Runner.events(result.stdout).ofType("step.failed", step: "get").last, "\(TransferTests.check(result))")
        #expect(failed["data"]?["code"]?.stringValue == "sha256_mismatch", "\(failed)")
        let message = failed["data"]?["error"]?.stringValue ?? ""
        let actual = try Tools.sha256(source)
        #expect(message.contains(wrong) && message.contains(actual), "\(message)")
        #expect(!FileManager.default.fileExists(atPath: destination))
        #expect(!FileManager.default.fileExists(atPath: runner.path("out/.big.bin.part")))
    }

    /// The same object with its true SHA-256 in the metadata: verified by it, byte for byte.
    @Test func aRangedDownloadIsVerifiedBySHA256() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let source = runner.path("src.bin")
        try Tools.randomFile(source, bytes: 9 * (1 << 20) + 777)
        let sha = try Tools.sha256(source)
        #expect(try peer.aws(["s3api", "put-object", "--bucket", "orc-bucket", "--key", "big.bin", "--body", source,
                              "--metadata", "sha256=\(sha)"]).status == 0)
        let destination = runner.path("out/big.bin")
        let file = runner.workflow(TransferTests.workflow(peer, """
              get:
                uses: s3.download
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: big.bin, destination: "\(destination)", part_size: 1048576,
                        concurrency: 3 }
            """))
        let result = try runner.run(file)
        #expect(result.status == 0, "\(TransferTests.check(result))")
        let outputs = try runner.stepOutputs("get")
        #expect(outputs?["verified"]?.stringValue == "sha256", "\(String(describing: outputs))")
        #expect(outputs?["sha256"]?.stringValue == sha)
        #expect(Tools.sameBytes(destination, source))
    }
}
