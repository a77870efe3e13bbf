import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// `http.download` and `workflows/http-download.yaml` against a real nginx on loopback: Range +
/// If-Range resume after kill -9, a changed file starting over, checksum refusal.
@Suite(.serialized) struct NginxDownloadTests {
    let runner = Runner(environment: ["VIMEO_TOKEN": Sandbox.token])

    /// Starts the download workflow rate-limited, kills it with SIGKILL once the partial file
    /// holds `fraction` of `size`, and returns the run id.
    func startAndKill(_ nginx: Nginx, name: String, size: Int, fraction: Double, destination: String,
                      maxRate: Int? = nil, extra: [String] = []) throws -> String
    {
        let process = try runner.start(Runner.workflow("http-download.yaml"), [
            "url": "\(nginx.base)/files/\(name)", "destination": destination, "max_rate": "\(maxRate ?? size / 16)",
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

    /// A download killed half way and resumed under `--max-rate 2M`: the rate it prints and
    /// journals is of the bytes the resumed attempt moved over its own seconds, about the cap
    /// (the 6 MiB found on disk made it 4 MiB/s and more), its first line has no rate nor ETA,
    /// and the run's average rate leaves out the time it lay dead. Tolerance: 1.5 to 2.8 MiB/s
    /// (the cap's quarter second of burst, a slow machine).
    @Test func aResumedDownloadShowsTheRateOfTheBytesItMoved() throws {
        let nginx = try Nginx()
        let size = 12 << 20
        try Tools.randomFile("\(nginx.www)/resumed.bin", bytes: size)
        let destination = runner.path("resumed.bin")
        let run = try startAndKill(nginx, name: "resumed.bin", size: size, fraction: 0.5, destination: destination, maxRate: 2 << 20)
        Thread.sleep(forTimeInterval: 2)  // dead for a while: not part of any rate

        let resumed = try runner.orchestrate(["resume", run, "--max-rate", "2M"])
        #expect(resumed.status == 0, "\(resumed.stderr)")
        #expect(try Tools.sha256(destination) == Tools.sha256("\(nginx.www)/resumed.bin"))
        let lines = resumed.stdout.split(separator: "\n").map(String.init).filter { $0.contains("s] download ") && $0.contains(" MiB") }
        let first = try #require(lines.first, "\(resumed.stdout)")
        #expect(!first.contains("/s") && !first.contains("ETA"), "a first report has no measured rate: \(first)")
        let last = try #require(lines.last)
        let printed = try #require(Self.rate(in: last), "\(resumed.stdout)")
        #expect(printed >= 1.5 && printed <= 2.8, "printed \(printed) MiB/s behind a 2 MiB/s cap: \(last)")

        let status = try runner.status(run)
        let progress = try #require(status["progress"]?.arrayValue?.last?["data"])
        let journaled = (progress["rate"]?.doubleValue ?? 0) / 1_048_576
        #expect(journaled >= 1.5 && journaled <= 2.8, "journaled \(journaled) MiB/s: \(progress.jsonText)")
        let resumedFrom = status["outputs"]?["resumed_from"]?.intValue ?? 0
        #expect(resumedFrom >= Int64(size / 2), "resumed from \(resumedFrom)")
        let moved = progress["bytes_moved"]?.intValue ?? -1
        #expect(moved <= Int64(size) - resumedFrom && moved >= Int64(size) - resumedFrom - (1 << 20),
                "the resumed attempt moved \(moved) bytes of the \(Int64(size) - resumedFrom) it lacked")
        let average = (status["transfer"]?["average_rate"]?.doubleValue ?? 0) / 1_048_576
        #expect(average >= 1.5 && average <= 2.8, "the run's average \(average) MiB/s: \(status["transfer"]?.jsonText ?? "")")
        #expect(status["transfer"]?["remaining_s"] == nil, "no ETA for a run that is not running")
    }

    /// `serve` killed with SIGKILL half way through a download, and a second `serve` on the same
    /// store resuming it: its `orchestrate_bytes_moved_total` counts the bytes it moved, not the
    /// 6 MiB it found on disk.
    @Test func aResumedDownloadCountsOnlyTheBytesItMovedInMetrics() throws {
        let nginx = try Nginx()
        let size = 12 << 20
        try Tools.randomFile("\(nginx.www)/metered.bin", bytes: size)
        let destination = runner.path("metered.bin")
        let submitted = try runner.orchestrate(["submit", Runner.workflow("http-download.yaml"),
                                                "--input", "url=\(nginx.base)/files/metered.bin", "--input", "destination=\(destination)"])
        #expect(submitted.status == 0, "\(submitted.stderr)")
        let run = submitted.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        func serve(_ port: Int) throws -> Process {
            let process = Process()
            process.executableURL = TestPaths.orchestrate
            process.arguments = ["serve", "--state", runner.state, "--max-rate", "4M", "--http", "127.0.0.1:\(port)"]
            process.standardOutput = FileHandle(forWritingAtPath: "/dev/null")
            process.standardError = FileHandle(forWritingAtPath: "/dev/null")
            try process.run()
            return process
        }
        let first = try serve(Ports.free())
        let part = runner.path(".metered.bin.part")
        let reached = Tools.waitFor(30) { Tools.size(part) >= size / 2 }
        kill(first.processIdentifier, SIGKILL)
        first.waitUntilExit()
        #expect(reached && Tools.size(part) < size, "killed at \(Tools.size(part)) of \(size)")

        let port = Ports.free()
        let second = try serve(port)
        defer {
            kill(second.processIdentifier, SIGTERM)
            second.waitUntilExit()
        }
        #expect(Tools.waitFor(60) { (try? runner.status(run))?["status"]?.stringValue == "succeeded" })
        let resumedFrom = try runner.status(run)["outputs"]?["resumed_from"]?.intValue ?? 0
        #expect(resumedFrom >= Int64(size / 2), "resumed from \(resumedFrom)")
        let token = try String(contentsOfFile: runner.state + "/http-token", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let scrape = try Tools.run(["curl", "-sS", "--max-time", "10", "-H", "Authorization: Bearer \(token)", "http://127.0.0.1:\(port)/metrics"]).stdout
        let sample = scrape.split(separator: "\n").first { $0.hasPrefix("orchestrate_bytes_moved_total{direction=\"download\",plugin=\"http\"}") }
        let counted = try #require(sample.flatMap { $0.split(separator: " ").last }.flatMap { Double($0) }, "\(scrape)")
        let lacked = Double(Int64(size) - resumedFrom)
        #expect(counted <= lacked && counted >= lacked - 1_048_576, "counted \(counted) bytes; the resumed download moved \(lacked)")
    }

    /// "2.0 MiB/s" in a progress line, in MiB/s.
    static func rate(in line: String) -> Double? {
        let words = line.split(separator: " ")
        guard let index = words.firstIndex(where: { $0.hasSuffix("/s") }), index > 0, let value = Double(words[index - 1]) else { return nil }
        let unit = words[index].dropLast(2)
        let scale: [Substring: Double] = ["B": 1.0 / 1_048_576, "KiB": 1.0 / 1024, "MiB": 1, "GiB": 1024]
        return scale[unit].map { value * $0 }
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
