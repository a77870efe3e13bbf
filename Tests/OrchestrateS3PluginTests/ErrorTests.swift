import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// S3 error documents become errors that say what to do, of the kind the scheduler acts on
/// (tools/s3_error_server.py answers every request with one scripted error).
@Suite struct ErrorTests {
    /// Runs an s3.download against the error server; its step.failed and step.retrying events.
    func fail(_ arguments: [String], attempts: Int = 1) throws -> (failed: JSONValue, retrying: [JSONValue]) {
        let server = try ScriptedServer("s3_error_server.py", arguments)
        let runner = S3Runner()
        let file = runner.workflow("""
            version: 1
            name: s3-errors
            steps:
              get:
                uses: s3.download
                retry: { max_attempts: \(attempts), initial_interval: 10ms }
                with: { endpoint: "http://\(server.address)", bucket: orc-bucket, key: k, destination: "\(runner.path("k.bin"))" }
            """)
        let result = try runner.run(file)
        let events = S3Runner.events(result.stdout)
        let failed = try #require(events.ofType("step.failed", step: "get").last, "\(TransferTests.check(result))")
        return (failed, events.ofType("step.retrying", step: "get"))
    }

    @Test func requestTimeTooSkewedSaysByHowMuch() throws {
        let (failed, _) = try fail(["--status", "403", "--code", "RequestTimeTooSkewed", "--skew", "930"])
        let message = failed["data"]?["error"]?.stringValue ?? ""
        #expect(message.contains("the clock is off by 930 s"), "\(message)")
        #expect(failed["data"]?["kind"]?.stringValue == "permanent")
    }

    @Test func slowDownIsRetriedAfterTheServersDelay() throws {
        let (failed, retrying) = try fail(["--status", "503", "--code", "SlowDown", "--retry-after", "1"], attempts: 2)
        #expect(failed["data"]?["code"]?.stringValue == "s3_SlowDown")
        let retry = try #require(retrying.first)
        #expect(retry["data"]?["kind"]?.stringValue == "retryable")
        #expect(retry["data"]?["retry_after"]?.boolValue == true)
        #expect(retry["data"]?["delay_ms"]?.intValue == 1000)
    }

    @Test func accessDeniedNamesTheKeyAndWhereItCameFrom() throws {
        let (failed, _) = try fail(["--status", "403", "--code", "AccessDenied"])
        let message = failed["data"]?["error"]?.stringValue ?? ""
        #expect(message.contains("access denied to s3://orc-bucket/k for \(S3Peer.accessKey) (from the environment)"), "\(message)")
        #expect(!message.contains(S3Peer.secretKey))
    }

    @Test func signatureDoesNotMatchPointsAtTheSecretAndTheClock() throws {
        let (failed, _) = try fail(["--status", "403", "--code", "SignatureDoesNotMatch"])
        let message = failed["data"]?["error"]?.stringValue ?? ""
        #expect(message.contains("the secret access key for \(S3Peer.accessKey)") && message.contains("clock"), "\(message)")
    }
}

/// A missing key on moto: the HEAD's 404 has no body, the error still names the object.
@Suite struct MissingObjectTests {
    @Test func aMissingKeyIsNamed() throws {
        let peer = try S3Peer(.moto)
        try peer.makeBucket("orc-bucket")
        let runner = S3Runner()
        let file = runner.workflow(TransferTests.workflow(peer, """
              get:
                uses: s3.download
                with: { endpoint: ENDPOINT, bucket: orc-bucket, key: "no/such key", destination: "\(runner.path("x.bin"))" }
            """))
        let result = try runner.run(file)
        let failed = try #require(S3Runner.events(result.stdout).ofType("step.failed", step: "get").last, "\(TransferTests.check(result))")
        let message = failed["data"]?["error"]?.stringValue ?? ""
        #expect(message.contains("there is no object s3://orc-bucket/no/such key"), "\(message)")
        #expect(failed["data"]?["code"]?.stringValue == "s3_NoSuchKey")
        #expect(!FileManager.default.fileExists(atPath: runner.path(".x.bin.part")))
    }
}

/// A server that pages ListObjectsV2 without end (tools/s3_endless_listing.py) fails the tree
/// download or the prefix delete with a clear error, instead of looping while memory grows.
@Suite struct EndlessListingTests {
    /// Runs `type` (s3.download of a prefix, or s3.delete of one) against the endless server in
    /// `mode`: its step.failed event, and how many listing pages the server served.
    func run(_ mode: String, _ type: String) throws -> (failed: JSONValue?, pages: Int) {
        let server = try ScriptedServer("s3_endless_listing.py", ["--mode", mode])
        let runner = S3Runner()
        let with = type == "s3.download"
            ? "{ endpoint: \"http://\(server.address)\", bucket: orc-bucket, prefix: \"p/\", destination: \"\(runner.path("tree"))\", max_files: 20000 }"
            : "{ endpoint: \"http://\(server.address)\", bucket: orc-bucket, prefix: \"p/\" }"
        let file = runner.workflow("""
            version: 1
            name: s3-endless
            steps:
              list:
                uses: \(type)
                with: \(with)
                retry: { max_attempts: 1 }
                timeout: 60s
            """)
        let result = try runner.run(file)
        let failed = S3Runner.events(result.stdout).ofType("step.failed", step: "list").last
        let count = try Tools.run(["/usr/bin/curl", "-s", "http://\(server.address)/count"]).stdout
        return (failed, Int(count) ?? -1)
    }

    @Test(arguments: ["s3.download", "s3.delete"])
    func aTokenHandedBackUnchangedEndsTheListing(type: String) throws {
        let (failed, pages) = try run("same-token", type)
        let data = try #require(failed?["data"], "the step did not fail")
        #expect(data["code"]?.stringValue == "s3_protocol" && data["kind"]?.stringValue == "permanent", "\(data)")
        #expect(data["error"]?.stringValue?.contains("continuation token it was sent") == true, "\(data)")
        #expect(pages == 2, "two pages: the first, then the one that handed its token back (\(pages))")
    }

    @Test func pagesWithoutAKeyEndTheListing() throws {
        let (failed, pages) = try run("empty-pages", "s3.download")
        let data = try #require(failed?["data"], "the step did not fail")
        #expect(data["code"]?.stringValue == "s3_protocol", "\(data)")
        #expect(pages == 100)
    }

    @Test func aTreeListingStopsAtMaxFiles() throws {
        let (failed, pages) = try run("new-tokens", "s3.download")
        let data = try #require(failed?["data"], "the step did not fail")
        #expect(data["code"]?.stringValue == "listing_too_large" && data["kind"]?.stringValue == "permanent", "\(data)")
        #expect(data["error"]?.stringValue?.contains("passed 20000 entries (max_files)") == true, "\(data)")
        #expect(pages == 21, "1,000 keys a page: the 21st passes 20,000 (\(pages))")
    }
}
