import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// The example workflows against the sandbox, through injected drops, 503s and 429s: the bytes
/// arrive identical and every retry is in the run's events.
@Suite(.serialized) struct SandboxUploadTests {
    let runner = Runner(environment: ["VIMEO_TOKEN": Sandbox.token])

    /// Drops at pseudo-random offsets (about three per file), every 4th transfer request a 503,
    /// about every 3rd a 429, both with Retry-After: 1.
    static func faults(size: Int) -> String {
        #"{"drop_after_bytes": \#(size / 3), "max_drops": 3, "rate_503": 0.25, "rate_429": 0.34, "retry_after": 1}"#
    }

    /// The retries of `step`: at least one per kind of injected fault. A tus PATCH cut on a
    /// kept-alive connection may instead be re-sent by libcurl on a fresh one ("connection died,
    /// retrying"), which the server answers 409 (it kept the cut bytes): that recovery is logged.
    func expectRetriesVisible(_ events: [JSONValue], step: String, sandbox: Sandbox) throws {
        let retries = events.ofType("step.retrying", step: step)
        let codes = retries.compactMap { $0["data"]?["code"]?.stringValue }
        let conflicts = events.ofType("step.log", step: step).filter { $0["data"]?["message"]?.stringValue?.contains("409 Conflict") == true }
        #expect(codes.contains { $0.hasPrefix("curl_") } || !conflicts.isEmpty, "no retry after a dropped connection: \(codes)")
        #expect(codes.contains("http_503") || codes.contains("http_429"), "no retry after a 503/429: \(codes)")
        let hinted = retries.filter { $0["data"]?["retry_after"]?.boolValue == true }
        #expect(hinted.allSatisfy { $0["data"]?["delay_ms"]?.intValue == 1000 }, "Retry-After not honoured: \(hinted)")
        let injected = try sandbox.state()["faults"]
        #expect((injected?["drops"]?.intValue ?? 0) >= 1)
        #expect((injected?["injected_503"]?.intValue ?? 0) + (injected?["injected_429"]?.intValue ?? 0) >= 1)
    }

    @Test func vimeoStreamingWorkflowThroughFaultsIsByteIdentical() throws {
        let sandbox = try Sandbox()
        let source = runner.path("video.mp4")
        try Tools.randomFile(source, bytes: TestSizes.big)
        try sandbox.setFaults(Self.faults(size: TestSizes.big))
        let result = try runner.run(Runner.workflow("vimeo-upload.yaml"), ["source": source, "api": sandbox.url, "title": "Faulty"])
        #expect(result.status == 0, "\(result.signalled ? "killed by signal \(result.status)\n" : "")\(result.stdout.suffix(3000))\n\(result.stderr.suffix(2000))")
        let events = Runner.events(result.stdout)
        let uri = try #require(events.runOutputs?["video"]?.stringValue)
        #expect(try Tools.sha256(sandbox.videoFile(uri)) == (try Tools.sha256(source)))
        let video = try #require(try sandbox.video(uri))
        #expect(video["activated"]?.boolValue == true)
        #expect(video["name"]?.stringValue == "Faulty")
        #expect(video["status"]?.stringValue == "available")
        try expectRetriesVisible(events, step: "upload", sandbox: sandbox)
        // Each resume was verified with the server (bytes */* → 308) and continued mid-file.
        let resumes = events.ofType("step.log", step: "upload").filter { $0["data"]?["message"]?.stringValue?.contains("continuing from there") == true }
        #expect(!resumes.isEmpty)
    }

    @Test func tusWorkflowThroughFaultsIsByteIdentical() throws {
        let sandbox = try Sandbox()
        let source = runner.path("video.mp4")
        try Tools.randomFile(source, bytes: TestSizes.big)
        try sandbox.setFaults(Self.faults(size: TestSizes.big))
        let result = try runner.run(Runner.workflow("vimeo-upload-tus.yaml"),
                                    ["source": source, "api": sandbox.url, "chunk_size": "\(TestSizes.big / 8)"])
        #expect(result.status == 0, "\(result.signalled ? "killed by signal \(result.status)\n" : "")\(result.stdout.suffix(3000))\n\(result.stderr.suffix(2000))")
        let events = Runner.events(result.stdout)
        let uri = try #require(events.runOutputs?["video"]?.stringValue)
        #expect(try Tools.sha256(sandbox.videoFile(uri)) == (try Tools.sha256(source)))
        #expect(events.runOutputs?["status"]?.stringValue == "available")
        try expectRetriesVisible(events, step: "upload", sandbox: sandbox)
    }

    @Test func downloadWorkflowThroughFaultsIsByteIdentical() throws {
        let sandbox = try Sandbox()
        let source = "\(sandbox.filesDir)/big.bin"
        try Tools.randomFile(source, bytes: TestSizes.big)
        let sha = try Tools.sha256(source)
        try sandbox.setFaults(Self.faults(size: TestSizes.big))
        let destination = runner.path("big.bin")
        let result = try runner.run(Runner.workflow("http-download.yaml"),
                                    ["url": "\(sandbox.url)/files/big.bin", "destination": destination, "sha256": sha])
        #expect(result.status == 0, "\(result.signalled ? "killed by signal \(result.status)\n" : "")\(result.stdout.suffix(3000))\n\(result.stderr.suffix(2000))")
        #expect(try Tools.sha256(destination) == sha)
        let events = Runner.events(result.stdout)
        try expectRetriesVisible(events, step: "download", sandbox: sandbox)
        let resumes = events.ofType("step.log", step: "download").filter { $0["data"]?["message"]?.stringValue?.hasPrefix("resuming") == true }
        #expect(resumes.count >= 1)
    }

    @Test func notEnoughQuotaStopsTheVimeoWorkflowAtOnceAndSaysWhy() throws {
        let sandbox = try Sandbox(arguments: ["--quota", "1000"])
        let source = runner.path("video.mp4")
        try Tools.randomFile(source, bytes: 4096)
        let result = try runner.run(Runner.workflow("vimeo-upload.yaml"), ["source": source, "api": sandbox.url])
        #expect(result.status == 1)
        let events = Runner.events(result.stdout)
        #expect(events.ofType("step.started", step: "check_quota").count == 1, "exit 3 is listed in non_retryable")
        let failed = try #require(events.ofType("step.failed", step: "check_quota").first?["data"])
        #expect(failed["code"]?.stringValue == "exit_3")
        #expect(failed["not_retried"]?.stringValue == "retryable error exit_3; exit_3 is listed in non_retryable")
        #expect(failed["error"]?.stringValue?.contains("not enough upload quota: 4096 bytes needed, 1000 free") == true)
        #expect(try sandbox.videos().isEmpty, "nothing was created")
    }

    @Test func retryAfterAsAnHTTPDateIsHonoured() throws {
        let sandbox = try Sandbox()
        try Tools.randomFile("\(sandbox.filesDir)/f.bin", bytes: 1000)
        try sandbox.setFaults(#"{"rate_429": 1.0, "retry_after": 3, "retry_after_date": true}"#)
        let file = runner.workflow("""
            version: 1
            name: dated
            steps:
              get:
                uses: http.download
                retry: { max_attempts: 2, initial_interval: 10ms }
                with: { url: "\(sandbox.url)/files/f.bin", destination: "\(runner.path("f.bin"))" }
            """)
        let result = try runner.run(file)
        #expect(result.status == 1)
        let retry = try #require(Runner.events(result.stdout).ofType("step.retrying", step: "get").first)
        #expect(retry["data"]?["retry_after"]?.boolValue == true)
        let delay = retry["data"]?["delay_ms"]?.intValue ?? 0
        #expect(delay >= 1000 && delay <= 3000, "Retry-After date gave \(delay) ms")
    }
}
