import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// `http.download` and `workflows/http-download.yaml` against a real nginx on loopback: Range +
/// If-Range resume after kill -9, a changed file starting over, checksum refusal.
@Suite(.serialized) struct NginxDownloadTests {
    let runner = Runner()

    /// Starts the download workflow rate-limited, kills it with SIGKILL once the partial file
    /// holds `fraction` of `size`, and returns the run id.
    func startAndKill(_ nginx: Nginx, name: String, size: Int, fraction: Double, destination: String,
                      extra: [String] = []) throws -> String
    {
        let process = try runner.start(Runner.workflow("http-download.yaml"), [
            "url": "\(nginx.base)/files/\(name)", "destination": destination, "max_rate": "\(size / 16)",
        ], extra: extra)
        let part = URL(fileURLWithPath: destination).deletingLastPathComponent().appendingPathComponent(".\(name).part").path
        let reached = Tools.waitFor(30) { Tools.size(part) >= Int(Double(size) * fraction) }
        kill(process.processIdentifier, SIGKILL)
        process.waitUntilExit()
        #expect(reached, "the download never reached \(fraction)")
        #expect(Tools.size(part) < size, "the download finished before the kill")
        return try #require(try runner.runIDs().last)
    }

    @Test func killedDownloadResumesWithRangeAndIfRangeAndIsByteIdentical() throws {
        let nginx = try Nginx()
        let size = TestSizes.big
        try Tools.randomFile("\(nginx.www)/big.bin", bytes: size)
        let expected = try Tools.sha256("\(nginx.www)/big.bin")
        let destination = runner.path("big.bin")
        let run = try startAndKill(nginx, name: "big.bin", size: size, fraction: 0.4, destination: destination)
        #expect(try runner.status(run)["status"]?.stringValue == "interrupted")

        let resumed = try runner.orchestrate(["resume", run])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(try Tools.sha256(destination) == expected)
        let outputs = try runner.status(run)["outputs"]
        let resumedFrom = outputs?["resumed_from"]?.intValue ?? 0
        #expect(resumedFrom >= Int64(Double(size) * 0.4), "resumed from \(resumedFrom)")
        // The second GET asked for the rest, tied to the first response's ETag, and got a 206.
        let ranged = nginx.accessLog.filter { $0.contains("range=[bytes=") }
        #expect(ranged.count == 1, "\(nginx.accessLog)")
        #expect(ranged.first?.contains(" 206 ") == true)
        #expect(ranged.first?.contains("ifrange=[\\x22") == true, "no strong ETag in If-Range (nginx logs \" as \\x22): \(ranged)")
        #expect(!FileManager.default.fileExists(atPath: runner.path(".big.bin.part")))
    }

    /// `run --id NAME` after a kill -9 of the run NAME continues it (says so): its partial file
    /// is kept and the rest asked for with one ranged GET. Without --id, the same command
    /// continues the interrupted run of the same workflow and inputs just the same.
    @Test(arguments: [true, false])
    func runningTheSameJobAgainAfterAKillResumesItAndKeepsThePartial(withID: Bool) throws {
        let nginx = try Nginx()
        let size = TestSizes.big
        try Tools.randomFile("\(nginx.www)/big.bin", bytes: size)
        let expected = try Tools.sha256("\(nginx.www)/big.bin")
        let destination = runner.path("big.bin")
        let id = withID ? ["--id", "nightly-1"] : []
        let run = try startAndKill(nginx, name: "big.bin", size: size, fraction: 0.4, destination: destination, extra: id)
        #expect(run == (withID ? "nightly-1" : run))
        let kept = Tools.size(runner.path(".big.bin.part"))

        let again = try ChildProcess.orchestrate(runner.arguments(Runner.workflow("http-download.yaml"), [
            "url": "\(nginx.base)/files/big.bin", "destination": destination, "max_rate": "\(size / 16)",
        ]) + id, environment: runner.environment)
        #expect(again.status == 0, "\(again.stderr)")
        #expect(again.stderr.contains("resuming run \(run) (interrupted)"), "\(again.stderr)")
        #expect(try runner.runIDs() == [run], "a second run was made")
        #expect(try Tools.sha256(destination) == expected)
        let resumedFrom = try runner.status(run)["outputs"]?["resumed_from"]?.intValue ?? 0
        #expect(kept >= Int(Double(size) * 0.4) && resumedFrom >= Int64(Double(size) * 0.4), "resumed from \(resumedFrom), kept \(kept)")
        #expect(nginx.accessLog.filter { $0.contains("range=[bytes=") }.count == 1, "\(nginx.accessLog)")
    }

    /// `run --max-rate`: the engine's cap reaches libcurl's socket reads through the bandwidth
    /// extension (the step's own `max_rate` is not set here). 3 MiB under 1 MiB/s, with a quarter
    /// second of burst, cannot take less than 2.75 s; checked from below only.
    @Test func theRunsMaxRateCapsARealDownload() throws {
        let nginx = try Nginx()
        try Tools.randomFile("\(nginx.www)/capped.bin", bytes: 3 << 20)
        let destination = runner.path("capped.bin")
        let started = Date()
        let result = try ChildProcess.orchestrate(runner.arguments(Runner.workflow("http-download.yaml"), [
            "url": "\(nginx.base)/files/capped.bin", "destination": destination,
        ]) + ["--max-rate", "1M"], environment: runner.environment)
        let elapsed = Date().timeIntervalSince(started)
        #expect(result.status == 0, "\(result.stderr)")
        #expect(elapsed >= 2.6, "3 MiB under a 1 MiB/s cap took only \(elapsed) s")
        #expect(try Tools.sha256(destination) == Tools.sha256("\(nginx.www)/capped.bin"))
    }

    @Test func aFileChangedOnTheServerStartsOverCleanly() throws {
        let nginx = try Nginx()
        // Well beyond what loopback socket buffers deliver in one burst before the rate limit bites.
        let size = 64 << 20
        try Tools.randomFile("\(nginx.www)/changing.bin", bytes: size)
        let destination = runner.path("changing.bin")
        let run = try startAndKill(nginx, name: "changing.bin", size: size, fraction: 0.3, destination: destination)
        // New content (and so a new ETag) while the download is interrupted.
        try Tools.randomFile("\(nginx.www)/changing.bin", bytes: size + 4096)
        let expected = try Tools.sha256("\(nginx.www)/changing.bin")

        let resumed = try runner.orchestrate(["resume", run])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(try Tools.sha256(destination) == expected)
        #expect(Tools.size(destination) == size + 4096)
        let step = try runner.status(run)["steps"]?.arrayValue?.first { $0["id"]?.stringValue == "download" }
        #expect(step?["outputs"]?["restarted"]?.boolValue == true)
        // If-Range did not match: nginx sent the whole new file with 200.
        let ranged = nginx.accessLog.filter { $0.contains("range=[bytes=") }
        #expect(ranged.first?.contains(" 200 ") == true, "\(nginx.accessLog)")
    }

    @Test func aChecksumMismatchFailsAndLeavesNoFile() throws {
        let nginx = try Nginx()
        try Tools.randomFile("\(nginx.www)/small.bin", bytes: 100_000)
        let destination = runner.path("small.bin")
        let result = try runner.run(Runner.workflow("http-download.yaml"), [
            "url": "\(nginx.base)/files/small.bin", "destination": destination, "sha256": String(repeating: "0", count: 64),
        ])
        #expect(result.status == 1)
        let events = Runner.events(result.stdout)
        let failed = events.ofType("step.failed", step: "download").last
        #expect(failed?["data"]?["code"]?.stringValue == "sha256_mismatch", "\(failed as Any)")
        #expect(events.ofType("step.retrying", step: "download").isEmpty, "a checksum mismatch is not retried")
        #expect(!FileManager.default.fileExists(atPath: destination))
        #expect(!FileManager.default.fileExists(atPath: runner.path(".small.bin.part")))
    }

    @Test func aCorrectChecksumPasses() throws {
        let nginx = try Nginx()
        try Tools.randomFile("\(nginx.www)/ok.bin", bytes: 3_000_000)
        let sha = try Tools.sha256("\(nginx.www)/ok.bin")
        let result = try runner.run(Runner.workflow("http-download.yaml"), [
            "url": "\(nginx.base)/files/ok.bin", "destination": runner.path("ok.bin"), "sha256": sha.uppercased(),
        ])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(Runner.events(result.stdout).runOutputs?["sha256"]?.stringValue == sha)
        #expect(try Tools.sha256(runner.path("ok.bin")) == sha)
    }
}
