import CCRC64NVME
import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// A download's end-to-end check: the digests are computed while the ranges arrive (the written
/// prefix hashed on another thread) and compared before the rename, with the object's
/// `x-amz-meta-crc64nvme` (s3.upload's), else S3's own `x-amz-checksum-crc64nvme`, else the
/// `x-amz-meta-sha256` of an older upload, else a single-part ETag.
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
                              "--metadata", "sha256=\(wrong)", "--checksum-algorithm", "SHA256"]).status == 0)
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
                              "--metadata", "sha256=\(sha)", "--checksum-algorithm", "SHA256"]).status == 0)
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

    /// The CRC-64/NVME of a file, by the table method (held to the definition by CRC64Tests).
    static func crc64(_ path: String) throws -> String {
        let bytes = try [UInt8](Data(contentsOf: URL(fileURLWithPath: path)))
        let crc = bytes.withUnsafeBytes { crc64nvme_update_portable(0, $0.baseAddress, $0.count) }
        let digits = String(crc, radix: 16)
        return String(repeating: "0", count: 16 - digits.count) + digits
    }

    /// What s3.upload writes (a multipart upload and a single PUT) carries the file's CRC-64 in
    /// its metadata, and a download is verified by it: no SHA-256 computed unless asked for.
    @Test func whatS3UploadWroteIsVerifiedByItsCRC64() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let big = runner.path("big.bin"), small = runner.path("small.bin")
        try Tools.randomFile(big, bytes: 11 * (1 << 20) + 333)
        try Tools.randomFile(small, bytes: 70_001)
        let file = runner.workflow(TransferTests.workflow(peer, """
              big:
                uses: s3.upload
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: big.bin, source: "\(big)", multipart_threshold: 5242880,
                        part_size: 5242880 }
              small:
                uses: s3.upload
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: small.bin, source: "\(small)" }
              get:
                needs: [big]
                uses: s3.download
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: big.bin, destination: "\(runner.path("out/big.bin"))",
                        part_size: 1048576, concurrency: 3 }
              get_sha:
                needs: [big]
                uses: s3.download
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: big.bin, destination: "\(runner.path("out/again.bin"))",
                        part_size: 1048576, sha256: true }
              tree:
                needs: [big, small]
                uses: s3.download
                with: { endpoint: ENDPOINT, bucket: orc-bucket, prefix: "", destination: "\(runner.path("tree"))", part_size: 1048576 }
            """))
        let result = try runner.run(file)
        #expect(result.status == 0, "\(TransferTests.check(result))")
        let bigCRC = try Self.crc64(big), smallCRC = try Self.crc64(small)
        #expect(try runner.stepOutputs("big")?["crc64nvme"]?.stringValue == bigCRC)
        #expect(try runner.stepOutputs("small")?["crc64nvme"]?.stringValue == smallCRC)
        for (key, crc) in [("big.bin", bigCRC), ("small.bin", smallCRC)] {
            let head = try JSONValue(parsing: try peer.aws(["s3api", "head-object", "--bucket", "orc-bucket", "--key", key]).stdout)
            #expect(head["Metadata"]?["crc64nvme"]?.stringValue == crc, "\(key): \(head)")
        }
        let get = try #require(try runner.stepOutputs("get"))
        #expect(get["verified"]?.stringValue == "crc64nvme", "\(get)")
        #expect(get["crc64nvme"]?.stringValue == bigCRC)
        #expect(get["sha256"] == nil, "\(get)")
        let again = try #require(try runner.stepOutputs("get_sha"))
        #expect(again["verified"]?.stringValue == "crc64nvme")
        #expect(again["sha256"]?.stringValue == (try Tools.sha256(big)))
        #expect(Tools.sameBytes(runner.path("out/big.bin"), big) && Tools.sameBytes(runner.path("out/again.bin"), big))
        #expect(Tools.sameBytes(runner.path("tree/big.bin"), big) && Tools.sameBytes(runner.path("tree/small.bin"), small))
    }

    /// An object whose CRC-64 metadata is not its bytes' fails (the CRC is what is checked
    /// first, even beside a true SHA-256), in ranges and as a tree's small object; nothing is
    /// left behind.
    @Test func aCRC64MetadataThatIsNotTheBytesFails() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let source = runner.path("src.bin")
        try Tools.randomFile(source, bytes: 3 * (1 << 20) + 5)
        let sha = try Tools.sha256(source)
        for key in ["big.bin", "dir/small.bin"] {
            #expect(try peer.aws(["s3api", "put-object", "--bucket", "orc-bucket", "--key", key, "--body", source,
                                  "--metadata", "crc64nvme=0123456789abcdef,sha256=\(sha)"]).status == 0)
        }
        let file = runner.workflow(TransferTests.workflow(peer, """
              get:
                uses: s3.download
                continue_on_error: true
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: big.bin, destination: "\(runner.path("out/big.bin"))",
                        part_size: 1048576 }
              tree:
                uses: s3.download
                continue_on_error: true
                with: { endpoint: ENDPOINT, bucket: orc-bucket, prefix: "dir/", destination: "\(runner.path("tree"))" }
            """))
        let result = try runner.run(file)
        let crc = try Self.crc64(source)
        for step in ["get", "tree"] {
            let failed = try #require(S3Runner.events(result.stdout).ofType("step.failed", step: step).last, "\(TransferTests.check(result))")
            #expect(failed["data"]?["code"]?.stringValue == "crc64_mismatch", "\(failed)")
            let message = failed["data"]?["error"]?.stringValue ?? ""
            #expect(message.contains("0123456789abcdef") && message.contains(crc), "\(message)")
        }
        #expect(!FileManager.default.fileExists(atPath: runner.path("out/big.bin")))
        #expect(!FileManager.default.fileExists(atPath: runner.path("out/.big.bin.part")))
        #expect(!FileManager.default.fileExists(atPath: runner.path("tree/small.bin")))
        #expect(!FileManager.default.fileExists(atPath: runner.path("tree/.small.bin.part")))
    }

    /// S3's own full-object checksum (`x-amz-checksum-crc64nvme`, what AWS's SDKs store by
    /// default; added here by a proxy, as moto does not keep it): a true one verifies the
    /// download, a false one fails it, and a value that is not 8 bytes (a 4-byte CRC-32 under
    /// that name) is not taken for one.
    @Test(arguments: ["right", "wrong", "short"]) func theServersOwnCRC64IsChecked(_ claim: String) throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let source = runner.path("src.bin")
        try Tools.randomFile(source, bytes: 2 * (1 << 20) + 99)
        #expect(try peer.aws(["s3api", "put-object", "--bucket", "orc-bucket", "--key", "obj.bin", "--body", source]).status == 0)
        let crc = try #require(UInt64(try Self.crc64(source), radix: 16))
        let value = switch claim {
        case "right": Data((0 ..< 8).map { UInt8(truncatingIfNeeded: crc >> (56 - 8 * $0)) }).base64EncodedString()
        case "wrong": Data((0 ..< 8).map { UInt8(truncatingIfNeeded: ~crc >> (56 - 8 * $0)) }).base64EncodedString()
        default: "AAECAw=="
        }
        let proxy = try ScriptedServer("s3_lost_answer_proxy.py", ["--target", "127.0.0.1:\(peer.port)", "--lose", "^(HEAD|GET) /orc-bucket/obj",
                                                                    "--answer-header", "x-amz-checksum-crc64nvme: \(value)"])
        // In ranges (HEAD's answer), and as a tree's small object (its GET's answer).
        let file = runner.workflow(TransferTests.workflow(peer, """
              get:
                uses: s3.download
                continue_on_error: true
                with: { endpoint: "http://\(proxy.address)", bucket: orc-bucket, key: obj.bin, destination: "\(runner.path("obj.bin"))",
                        part_size: 1048576 }
              tree:
                uses: s3.download
                continue_on_error: true
                with: { endpoint: "http://\(proxy.address)", bucket: orc-bucket, prefix: "", destination: "\(runner.path("tree"))" }
            """))
        let result = try runner.run(file)
        switch claim {
        case "wrong":
            for step in ["get", "tree"] {
                let failed = S3Runner.events(result.stdout).ofType("step.failed", step: step).last
                #expect(failed?["data"]?["code"]?.stringValue == "crc64_mismatch", "\(step): \(TransferTests.check(result))")
            }
            for left in ["obj.bin", ".obj.bin.part", "tree/obj.bin", "tree/.obj.bin.part"] {
                #expect(!FileManager.default.fileExists(atPath: runner.path(left)), "\(left)")
            }
        default:
            #expect(result.status == 0, "\(TransferTests.check(result))")
            #expect(S3Runner.events(result.stdout).ofType("step.failed").isEmpty, "\(TransferTests.check(result))")
            #expect(try runner.stepOutputs("get")?["verified"]?.stringValue == (claim == "right" ? "crc64nvme" : "md5"))
            #expect(Tools.sameBytes(runner.path("obj.bin"), source) && Tools.sameBytes(runner.path("tree/obj.bin"), source))
        }
    }

    /// A tree's small objects are checked by what their own answer carries: one with only a
    /// false `x-amz-meta-sha256` fails by it, and an empty one (no body, so no head before one)
    /// with a false CRC-64 fails by that.
    @Test(arguments: ["sha-only", "empty"]) func aTreesSmallObjectIsCheckedByItsAnswer(_ kind: String) throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let source = runner.path("src.bin")
        try Tools.randomFile(source, bytes: kind == "empty" ? 0 : 40_000)
        let metadata = kind == "empty" ? "crc64nvme=0123456789abcdef" : "sha256=\(String(repeating: "cd", count: 32))"
        #expect(try peer.aws(["s3api", "put-object", "--bucket", "orc-bucket", "--key", "d/f.bin", "--body", source,
                              "--metadata", metadata, "--checksum-algorithm", "SHA256"]).status == 0)
        let file = runner.workflow(TransferTests.workflow(peer, """
              tree:
                uses: s3.download
                with: { endpoint: ENDPOINT, bucket: orc-bucket, prefix: "d/", destination: "\(runner.path("tree"))" }
            """))
        let result = try runner.run(file)
        #expect(result.status != 0)
        let failed = S3Runner.events(result.stdout).ofType("step.failed", step: "tree").last
        #expect(failed?["data"]?["code"]?.stringValue == (kind == "empty" ? "crc64_mismatch" : "sha256_mismatch"),
                "\(TransferTests.check(result))")
        #expect(!FileManager.default.fileExists(atPath: runner.path("tree/f.bin")))
        #expect(!FileManager.default.fileExists(atPath: runner.path("tree/.f.bin.part")))
    }

    /// `sha256: true` pays for the SHA-256, so a stored `x-amz-meta-sha256` is compared as well:
    /// a true CRC-64 beside a false SHA-256 fails then, and passes without it.
    @Test func aComputedSHA256IsComparedWithTheStoredOne() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let source = runner.path("src.bin")
        try Tools.randomFile(source, bytes: 3 * (1 << 20) + 1)
        let crc = try Self.crc64(source)
        #expect(try peer.aws(["s3api", "put-object", "--bucket", "orc-bucket", "--key", "o.bin", "--body", source, "--metadata",
                              "crc64nvme=\(crc),sha256=\(String(repeating: "ef", count: 32))", "--checksum-algorithm", "SHA256"]).status == 0)
        let file = runner.workflow(TransferTests.workflow(peer, """
              plain:
                uses: s3.download
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: o.bin, destination: "\(runner.path("plain.bin"))", part_size: 1048576 }
              hashed:
                needs: [plain]
                uses: s3.download
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: o.bin, destination: "\(runner.path("hashed.bin"))", part_size: 1048576,
                        sha256: true }
            """))
        let result = try runner.run(file)
        #expect(result.status != 0)
        #expect(try runner.stepOutputs("plain")?["verified"]?.stringValue == "crc64nvme")
        #expect(Tools.sameBytes(runner.path("plain.bin"), source))
        let failed = S3Runner.events(result.stdout).ofType("step.failed", step: "hashed").last
        #expect(failed?["data"]?["code"]?.stringValue == "sha256_mismatch", "\(TransferTests.check(result))")
        #expect(!FileManager.default.fileExists(atPath: runner.path("hashed.bin")))
    }
}
