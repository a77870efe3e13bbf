import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// kill -9 in the middle of a tus upload then `resume`; cancel during an upload (compensation
/// deletes the video); cancel reaching a stalled transfer; the low-speed abort.
@Suite(.serialized) struct ResumeAndCancelTests {
    let runner = Runner()

    @Test func killNineAt60PercentOfATusUploadThenResumeResendsAtMostOneChunk() throws {
        let sandbox = try Sandbox()
        let size = TestSizes.big
        let chunk = size / 16
        let source = runner.path("video.mp4")
        try Tools.randomFile(source, bytes: size)
        let process = try runner.start(Runner.workflow("vimeo-upload-tus.yaml"), [
            "source": source, "api": sandbox.url, "chunk_size": "\(chunk)", "max_rate": "\(size / 4)",
        ])
        let reached = Tools.waitFor(60) {
            ((try? sandbox.videos().first?["received"]?.intValue) ?? 0) >= Int64(Double(size) * 0.6)
        }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(reached)
        let atKill = try #require(try sandbox.videos().first)
        #expect((atKill["received"]?.intValue ?? 0) < Int64(size), "the upload finished before the kill")
        let run = try #require(try runner.runIDs().last)
        #expect(try runner.status(run)["status"]?.stringValue == "interrupted")

        let resumed = try runner.orchestrate(["resume", run])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        let video = try #require(try sandbox.videos().first)
        let uri = try #require(video["uri"]?.stringValue)
        #expect(video["status"]?.stringValue == "available")
        #expect(try Tools.sha256(sandbox.videoFile(uri)) == (try Tools.sha256(source)))
        let total = video["bytes_received_total"]?.intValue ?? 0
        #expect(total <= Int64(size + chunk), "the server received \(total) bytes for a \(size)-byte file")
        let outputs = try runner.status(run)["outputs"]
        #expect((outputs?["resumed_from"]?.intValue ?? 0) >= Int64(Double(size) * 0.6))
    }

    @Test func cancelDuringTheUploadRunsTheCompensationAndTheVideoIsDeleted() throws {
        let sandbox = try Sandbox()
        let size = 32 << 20
        let source = runner.path("video.mp4")
        try Tools.randomFile(source, bytes: size)
        let process = try runner.start(Runner.workflow("vimeo-upload.yaml"), [
            "source": source, "api": sandbox.url, "max_rate": "\(size / 8)",
        ])
        let uploading = Tools.waitFor(30) { ((try? sandbox.videos().first?["received"]?.intValue) ?? 0) > Int64(size / 10) }
        #expect(uploading)
        kill(process.processIdentifier, SIGINT)
        let deadline = Date().addingTimeInterval(15)
        while process.isRunning && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        #expect(!process.isRunning)
        process.waitUntilExit()
        #expect(process.terminationStatus == 130)
        let video = try #require(try sandbox.videos().first)
        #expect(video["deleted"]?.boolValue == true, "\(video)")
        #expect((video["received"]?.intValue ?? 0) < Int64(size))
        let events = Runner.events((try? String(contentsOfFile: runner.path("events.jsonl"), encoding: .utf8)) ?? "")
        #expect(!events.ofType("run.compensating").isEmpty)
        #expect(!events.ofType("step.succeeded", step: "compensate:create").isEmpty)
        #expect(!events.ofType("step.cancelled", step: "upload").isEmpty, "the upload was not interrupted by the cancel")
    }

    @Test func cancelInterruptsAStalledTransferWithinASecond() throws {
        let sandbox = try Sandbox()
        try Tools.randomFile("\(sandbox.filesDir)/stall.bin", bytes: 4 << 20)
        try sandbox.setFaults(#"{"stall_ms": 60000, "stall_after_bytes": 1048576}"#)
        let process = try runner.start(Runner.workflow("http-download.yaml"), [
            "url": "\(sandbox.url)/files/stall.bin", "destination": runner.path("stall.bin"),
        ])
        let stalled = Tools.waitFor(30) { ((try? sandbox.state()["faults"]?["stalls"]?.intValue) ?? 0) >= 1 }
        #expect(stalled)
        Thread.sleep(forTimeInterval: 0.3)
        let asked = Date()
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        let elapsed = Date().timeIntervalSince(asked)
        #expect(process.terminationStatus == 130)
        #expect(elapsed < 2.0, "cancel took \(elapsed) s")
        let events = Runner.events((try? String(contentsOfFile: runner.path("events.jsonl"), encoding: .utf8)) ?? "")
        let ended = events.filter { $0["step"]?.stringValue == "download" && ["step.cancelled", "step.failed"].contains($0["type"]?.stringValue ?? "") }
        #expect(!ended.isEmpty)
    }

    @Test func aStalledTransferIsAbortedByTheLowSpeedLimitAndRetried() throws {
        let sandbox = try Sandbox()
        try Tools.randomFile("\(sandbox.filesDir)/slow.bin", bytes: 4 << 20)
        let sha = try Tools.sha256("\(sandbox.filesDir)/slow.bin")
        try sandbox.setFaults(#"{"stall_ms": 30000, "stall_after_bytes": 1048576, "max_stalls": 1}"#)
        let file = runner.workflow("""
            version: 1
            name: slow
            steps:
              get:
                uses: http.download
                retry: { max_attempts: 3, initial_interval: 10ms }
                with: { url: "\(sandbox.url)/files/slow.bin", destination: "\(runner.path("slow.bin"))", min_speed: 10000, min_speed_time: 1 }
            """)
        let started = Date()
        let result = try runner.run(file)
        #expect(result.status == 0, "\(result.stdout.suffix(2000))")
        #expect(Date().timeIntervalSince(started) < 15)
        let retry = try #require(Runner.events(result.stdout).ofType("step.retrying", step: "get").first)
        #expect(retry["data"]?["kind"]?.stringValue == "timeout")
        #expect(try Tools.sha256(runner.path("slow.bin")) == sha)
    }
}
