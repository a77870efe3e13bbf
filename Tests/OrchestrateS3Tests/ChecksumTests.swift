import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// The `x-amz-checksum-sha256` of each request: moto keeps the object's SHA-256 checksum as
/// AWS does (the file's for a single PUT, the checksum of the parts' SHA-256s for a multipart
/// upload), which `head-object --checksum-mode ENABLED` shows. (`rclone serve s3` takes the
/// headers and keeps nothing: TransferTests' rclone round trip runs with them.)
@Suite struct ChecksumTests {
    /// base64(sha256(file)) for one part, else base64(sha256(sha256(part 1) ‖ …))-N.
    static func expected(_ path: String, partSize: Int?) throws -> String {
        let script = """
            import base64, hashlib, sys
            data = open(sys.argv[1], 'rb').read()
            size = int(sys.argv[2])
            if size == 0:
                print(base64.b64encode(hashlib.sha256(data).digest()).decode())
            else:
                parts = [hashlib.sha256(data[i:i + size]).digest() for i in range(0, len(data), size)]
                print(base64.b64encode(hashlib.sha256(b''.join(parts)).digest()).decode() + '-%d' % len(parts))
            """
        let result = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/python3"), ["-c", script, path, "\(partSize ?? 0)"])
        return result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    @Test func objectsCarryTheirSHA256Checksums() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let small = runner.path("small.bin"), big = runner.path("big.bin")
        try Tools.randomFile(small, bytes: 300_000)
        try Tools.randomFile(big, bytes: 11 << 20)
        let file = runner.workflow(TransferTests.workflow(peer, """
              small:
                uses: s3.upload
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: small.bin, source: "\(small)" }
              big:
                uses: s3.upload
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: big.bin, source: "\(big)", multipart_threshold: 5242880, part_size: 5242880 }
            """))
        let result = try runner.run(file)
        #expect(result.status == 0, "\(TransferTests.check(result))")
        for (key, path, partSize) in [("small.bin", small, nil), ("big.bin", big, 5 << 20)] as [(String, String, Int?)] {
            let head = try peer.aws(["s3api", "head-object", "--bucket", "orc-bucket", "--key", key, "--checksum-mode", "ENABLED"])
            #expect(head.status == 0, "\(head.stderr)")
            let json = try JSONValue(parsing: head.stdout)
            // (moto's HEAD leaves out the "-N" of a checksum of checksums; AWS's has it.)
            let expected = try Self.expected(path, partSize: partSize)
            let kept = json["ChecksumSHA256"]?.stringValue
            #expect(kept == expected || kept.map { $0 + "-3" } == expected, "\(key): expected \(expected), \(head.stdout)")
        }
    }
}

/// A checksum the server answers that is not the bytes' (tools/s3_lost_answer_proxy.py
/// --wrong-checksum) fails the part, retryably: the retry adopts the part the server holds by
/// its MD5, and the object is whole.
@Suite struct ChecksumMismatchTests {
    @Test(arguments: ["^PUT [^?]*\\?partNumber=2&", "^PUT /orc-bucket/small.bin$"]) func aWrongChecksumInTheAnswerIsCaught(lose: String) throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let proxy = try ScriptedServer("s3_lost_answer_proxy.py", ["--target", "127.0.0.1:\(peer.port)", "--lose", lose, "--wrong-checksum"])
        let runner = S3Runner()
        let big = runner.path("big.bin"), small = runner.path("small.bin")
        try Tools.randomFile(big, bytes: 11 << 20)
        try Tools.randomFile(small, bytes: 1000)
        let file = runner.workflow("""
            version: 1
            name: s3-wrong-checksum
            steps:
              big:
                uses: s3.upload
                retry: { max_attempts: 2, initial_interval: 20ms }
                with: { endpoint: "http://\(proxy.address)", bucket: orc-bucket, key: big.bin, source: "\(big)",
                        multipart_threshold: 5242880, part_size: 5242880 }
              small:
                uses: s3.upload
                retry: { max_attempts: 2, initial_interval: 20ms }
                with: { endpoint: "http://\(proxy.address)", bucket: orc-bucket, key: small.bin, source: "\(small)" }
            """)
        let result = try runner.run(file)
        #expect(result.status == 0, "\(TransferTests.check(result))")
        let retries = S3Runner.events(result.stdout).ofType("step.retrying")
        #expect(retries.count == 1 && retries.first?["data"]?["code"]?.stringValue == "checksum_mismatch", "\(retries)")
        for (key, path) in [("big.bin", big), ("small.bin", small)] {
            let cli = runner.path("cli-\(key)")
            #expect(try peer.aws(["s3api", "get-object", "--bucket", "orc-bucket", "--key", key, cli]).status == 0)
            #expect(Tools.sameBytes(cli, path), "\(key)")
        }
    }
}
