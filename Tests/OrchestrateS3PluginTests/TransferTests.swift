import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// s3.upload, s3.download and s3.delete through the real binary against moto_server (AWS's
/// semantics) and `rclone serve s3` (which checks every signature), read back and written by
/// the AWS CLI.
@Suite(.serialized) struct TransferTests {
    static let mib = 1 << 20

    /// A workflow whose steps all talk to `peer`'s `bucket`.
    static func workflow(_ peer: S3Peer, _ steps: String) -> String {
        """
        version: 1
        name: s3-test
        defaults:
          retry: { max_attempts: 3, initial_interval: 100ms }
        steps:
        \(steps.replacingOccurrences(of: "ENDPOINT", with: peer.endpoint))
        """
    }

    static func check(_ result: ProcessResult) -> String { "\(result.stderr.suffix(2000))\n\(result.stdout.suffix(3000))" }

    func roundTrip(_ kind: S3Peer.Kind, key: String) throws {
        let peer = try S3Peer(kind)
        let runner = S3Runner()
        try peer.makeBucket("orc-bucket")
        let small = runner.path("small.bin"), big = runner.path("big.bin")
        try Tools.randomFile(small, bytes: 100_000)
        try Tools.randomFile(big, bytes: 23 * Self.mib + 12345)
        let file = runner.workflow(Self.workflow(peer, """
              small:
                uses: s3.upload
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: "\(key).small", source: "\(small)" }
              big:
                uses: s3.upload
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: "\(key)", source: "\(big)", multipart_threshold: 5242880,
                        part_size: 5242880, concurrency: 3 }
              get:
                needs: [big]
                uses: s3.download
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: "\(key)", destination: "\(runner.path("back/big.bin"))",
                        part_size: 4194304, concurrency: 3 }
              drop:
                # After the multipart upload: rclone serve s3 removes a folder a delete left
                # empty, and an upload still open under it then fails ("file does not exist").
                needs: [small, get]
                uses: s3.delete
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: "\(key).small" }
            """))
        let result = try runner.run(file)
        #expect(result.status == 0, "\(Self.check(result))\nserver: \(peer.serverLog.suffix(3000))")
        let bigOutputs = try runner.stepOutputs("big")
        #expect(bigOutputs?["parts"]?.intValue == 5, "\(String(describing: bigOutputs))")
        #expect(bigOutputs?["etag"]?.stringValue?.hasSuffix("-5") == true)
        // A file's outputs, and none of a folder's.
        #expect(bigOutputs?.objectValue?.keys.sorted() == ["bucket", "crc64nvme", "etag", "key", "parts", "parts_resumed", "sha256", "size", "uri"])

        // The AWS CLI reads the multipart object back byte for byte, with its SHA-256 metadata.
        let readBack = runner.path("cli-big.bin")
        let got = try peer.aws(["s3api", "get-object", "--bucket", "orc-bucket", "--key", key, readBack])
        #expect(got.status == 0, "\(got.stderr)")
        #expect(Tools.sameBytes(readBack, big))
        let head = try JSONValue(parsing: try peer.aws(["s3api", "head-object", "--bucket", "orc-bucket", "--key", key]).stdout)
        let local = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/sha256sum"), [big]).stdout.prefix(64)
        // (rclone answers the metadata's name as Sha256.)
        #expect((head["Metadata"]?["sha256"] ?? head["Metadata"]?["Sha256"])?.stringValue == String(local), "\(head)")
        // s3.download got the same bytes, verified against the CRC-64 stored beside it.
        #expect(Tools.sameBytes(runner.path("back/big.bin"), big))
        let getOutputs = try runner.stepOutputs("get")
        #expect(getOutputs?["verified"]?.stringValue == "crc64nvme")
        #expect(getOutputs?.objectValue?.keys.sorted() == ["crc64nvme", "etag", "path", "ranges_resumed", "size", "uri", "verified"])
        #expect(try runner.stepOutputs("drop")?.objectValue?.keys.sorted() == ["deleted", "uri"])
        // The small one went up in one PUT and was deleted.
        let gone = try peer.aws(["s3api", "head-object", "--bucket", "orc-bucket", "--key", "\(key).small"])
        #expect(gone.status != 0)
        #expect(try peer.openUploads("orc-bucket").isEmpty)

        // The other way round: an object the AWS CLI wrote, downloaded and checked by its MD5 ETag.
        let cliFile = runner.path("cli-written.bin")
        try Tools.randomFile(cliFile, bytes: 3 * Self.mib + 7)
        let put = try peer.aws(["s3api", "put-object", "--bucket", "orc-bucket", "--key", "from cli/é+=.bin", "--body", cliFile])
        #expect(put.status == 0, "\(put.stderr)")
        let down = runner.workflow(Self.workflow(peer, """
              get:
                uses: s3.download
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: "from cli/é+=.bin", destination: "\(runner.path("cli-back.bin"))",
                        part_size: 1048576 }
            """), name: "down.yaml")
        let downloaded = try runner.run(down)
        #expect(downloaded.status == 0, "\(Self.check(downloaded))")
        #expect(Tools.sameBytes(runner.path("cli-back.bin"), cliFile))
        let verified = try runner.stepOutputs("get")?["verified"]
        #expect(verified?.stringValue == "md5")
    }

    @Test func roundTripWithMoto() throws {
        try roundTrip(.moto, key: "dir/a key+with=odd~chars/été 日本.bin")
    }

    /// rclone checks every signature: a signing bug fails here.
    @Test func roundTripWithRcloneCheckingSignatures() throws {
        try roundTrip(.rclone, key: "dir/a key+with=odd~chars/été 日本.bin")
    }

    /// Virtual-hosted addressing: the bucket in the host name (libcurl resolves *.localhost to
    /// loopback), the path without it, as moto's request log shows.
    @Test func virtualHostedAddressingWithMoto() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("vbucket")
        let runner = S3Runner()
        let source = runner.path("v.bin")
        try Tools.randomFile(source, bytes: 300_000)
        let file = runner.workflow("""
            version: 1
            name: s3-virtual
            steps:
              up:
                uses: s3.upload
                with: { endpoint: "http://localhost:\(peer.port)", addressing_style: virtual, bucket: vbucket, key: "v/a b.bin", source: "\(source)" }
              get:
                needs: [up]
                uses: s3.download
                with: { endpoint: "http://localhost:\(peer.port)", addressing_style: virtual, bucket: vbucket, key: "v/a b.bin",
                        destination: "\(runner.path("back.bin"))" }
            """)
        let result = try runner.run(file)
        #expect(result.status == 0, "\(Self.check(result))")
        #expect(Tools.sameBytes(runner.path("back.bin"), source))
        #expect(peer.serverLog.contains("\"PUT /v/a%20b.bin HTTP/1.1\" 200"), "\(peer.serverLog.suffix(1500))")
        let cli = runner.path("cli.bin")
        #expect(try peer.aws(["s3api", "get-object", "--bucket", "vbucket", "--key", "v/a b.bin", cli]).status == 0)
        #expect(Tools.sameBytes(cli, source))
    }

    /// A wrong secret: the error says to check the secret (or the clock), and the secret is in
    /// no event, log or the state store.
    @Test func wrongSecretSaysSoAndIsNeverStored() throws {
        let peer = try S3Peer(.rclone)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        runner.environment["AWS_SECRET_ACCESS_KEY"] = "wrong-secret-VALUE-1234"
        runner.environment["AWS_SESSION_TOKEN"] = "session-TOKEN-VALUE-5678"
        let small = runner.path("small.bin")
        try Tools.randomFile(small, bytes: 1000)
        let file = runner.workflow(Self.workflow(peer, """
              up:
                uses: s3.upload
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: k, source: "\(small)" }
            """))
        let result = try runner.run(file)
        #expect(result.status != 0)
        let failed = try #require(S3Runner.events(result.stdout).ofType("step.failed", step: "up").last, "\(Self.check(result))")
        let message = failed["data"]?["error"]?.stringValue ?? ""
        #expect(message.contains(S3Peer.accessKey), "\(message)")
        #expect(message.contains("secret access key") || message.contains("access denied"), "\(message)")
        let everything = result.stdout + result.stderr + (try Self.stateText(runner.state))
        #expect(!everything.contains("wrong-secret-VALUE-1234"))
        #expect(!everything.contains("session-TOKEN-VALUE-5678"))
    }

    /// moto answers NoSuchBucket: the error names the bucket and what to check.
    @Test func missingBucketIsNamed() throws {
        let peer = try S3Peer(.moto)
        let runner = S3Runner()
        let small = runner.path("small.bin")
        try Tools.randomFile(small, bytes: 1000)
        let file = runner.workflow(Self.workflow(peer, """
              up:
                uses: s3.upload
                with: { endpoint: ENDPOINT, bucket: no-such-bucket, key: k, source: "\(small)" }
            """))
        let result = try runner.run(file)
        let failed = try #require(S3Runner.events(result.stdout).ofType("step.failed", step: "up").last, "\(Self.check(result))")
        let message = failed["data"]?["error"]?.stringValue ?? ""
        #expect(message.contains("the bucket no-such-bucket does not exist"), "\(message)")
        #expect(failed["data"]?["code"]?.stringValue == "s3_NoSuchBucket")
    }

    /// Every byte of the state directory (SQLite files included) as text, to search for a secret.
    static func stateText(_ state: String) throws -> String {
        var text = ""
        let files = FileManager.default.enumerator(atPath: state)
        while let name = files?.nextObject() as? String {
            if let data = FileManager.default.contents(atPath: state + "/" + name) { text += String(decoding: data, as: UTF8.self) }
        }
        return text
    }
}

extension [JSONValue] {
    func ofType(_ type: String, step: String? = nil) -> [JSONValue] {
        filter { $0["type"]?.stringValue == type && (step == nil || $0["step"]?.stringValue == step) }
    }
}
