import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// kill -9 or Ctrl-C in the middle of an upload then `resume`; `cancel` of the interrupted run
/// (compensation deletes the video); an interrupt reaching a stalled transfer; the low-speed abort.
@Suite(.serialized) struct ResumeAndCancelTests {
    let runner = Runner(environment: ["VIMEO_TOKEN": Sandbox.token])

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

    /// Ctrl-C through a real terminal (tmux) at mid-transfer of the Vimeo flow, then `resume`:
    /// the upload continues from its offset and nothing was undone (the video is there); Ctrl-C
    /// again, then `cancel`: the compensation runs (the video is deleted).
    @Test func ctrlCInATerminalThenResumeContinuesTheUploadAndCancelRunsTheCompensation() throws {
        let sandbox = try Sandbox()
        let size = 32 << 20
        let source = runner.path("video.mp4")
        try Tools.randomFile(source, bytes: size)
        let run = "night-upload"
        let orchestrate = TestPaths.orchestrate.path, state = "--state \(runner.state)"
        let arguments = runner.arguments(Runner.workflow("vimeo-upload.yaml"), [
            "source": source, "api": sandbox.url, "max_rate": "\(size / 8)",
        ]).dropFirst().filter { $0 != "--json" && $0 != "--state" && $0 != runner.state }
        let session = try TmuxSession("export NO_COLOR=1 VIMEO_TOKEN=\(Sandbox.token); "
            + "\(orchestrate) run --id \(run) \(arguments.joined(separator: " ")) \(state); echo EXIT1=$?; "
            + "\(orchestrate) resume \(run) \(state); echo EXIT2=$?; sleep 60")
        defer { session.close() }
        func received() -> Int64 { (try? sandbox.videos().first?["received"]?.intValue) ?? 0 }

        #expect(Tools.waitFor(30) { received() > Int64(size / 4) })
        try session.send("C-c")
        #expect(Tools.waitFor(15) { session.screen(history: true).contains("EXIT1=130") }, "\(session.screen(history: true))")
        let atInterrupt = received()
        #expect(atInterrupt < Int64(size), "the upload finished before the Ctrl-C")
        let screen = session.screen(history: true).replacingOccurrences(of: "\n", with: "")
        #expect(screen.contains("orchestrate resume \(run) --state \(runner.state)"), "\(screen)")
        #expect(screen.contains("orchestrate cancel \(run) --state \(runner.state)"), "\(screen)")
        #expect(try sandbox.videos().first?["deleted"]?.boolValue != true, "the Ctrl-C ran the compensation")

        // The resume (started by the script) continues from the offset: no byte sent twice but
        // those of the PUT in flight at the interrupt.
        #expect(Tools.waitFor(30) { received() > atInterrupt + Int64(size / 8) })
        let total = try #require(try sandbox.videos().first)["bytes_received_total"]?.intValue ?? 0
        #expect(total <= received() + Int64(size / 8) + (1 << 20),
                "the server received \(total) bytes for \(received()) kept: the upload started again from zero")
        try session.send("C-c")
        #expect(Tools.waitFor(15) { session.screen(history: true).contains("EXIT2=130") }, "\(session.screen(history: true))")
        #expect(try sandbox.videos().first?["deleted"]?.boolValue != true)
        let steps = try runner.status(run)["steps"]?.arrayValue ?? []
        #expect(!steps.contains { ($0["id"]?.stringValue ?? "").hasPrefix("compensate:") }, "no compensation ran: \(steps)")

        let cancelled = try runner.orchestrate(["cancel", run])
        #expect(cancelled.status == 0, "\(cancelled.stdout)\n\(cancelled.stderr)")
        let video = try #require(try sandbox.videos().first)
        #expect(video["deleted"]?.boolValue == true, "\(video)")
        #expect(try runner.status(run)["status"]?.stringValue == "cancelled")
    }

    /// SIGINT then `resume` of the tus flow: the upload continues from the server's offset.
    @Test func sigintAtMidUploadThenResumeContinuesFromTheOffset() throws {
        let sandbox = try Sandbox()
        let size = TestSizes.big
        let chunk = size / 16
        let source = runner.path("video.mp4")
        try Tools.randomFile(source, bytes: size)
        let process = try runner.start(Runner.workflow("vimeo-upload-tus.yaml"), [
            "source": source, "api": sandbox.url, "chunk_size": "\(chunk)", "max_rate": "\(size / 4)",
        ])
        #expect(Tools.waitFor(60) { ((try? sandbox.videos().first?["received"]?.intValue) ?? 0) >= Int64(Double(size) * 0.4) })
        kill(process.processIdentifier, SIGINT)
        process.waitUntilExit()
        #expect(process.terminationStatus == 130)
        let run = try #require(try runner.runIDs().last)
        #expect(try runner.status(run)["status"]?.stringValue == "interrupted")
        let resumed = try runner.orchestrate(["resume", run])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        let video = try #require(try sandbox.videos().first)
        #expect(video["status"]?.stringValue == "available")
        #expect(try Tools.sha256(sandbox.videoFile(try #require(video["uri"]?.stringValue))) == (try Tools.sha256(source)))
        let total = video["bytes_received_total"]?.intValue ?? 0
        #expect(total <= Int64(size + chunk), "the server received \(total) bytes for a \(size)-byte file")
        #expect((try runner.status(run)["outputs"]?["resumed_from"]?.intValue ?? 0) >= Int64(Double(size) * 0.4))
    }

    @Test func anInterruptReachesAStalledTransferWithinASecond() throws {
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
        let ended = events.filter { $0["step"]?.stringValue == "download" && $0["type"]?.stringValue == "step.interrupted" }
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
