import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// The short crash campaign (tools/crash_campaign.py): 24 SIGKILLs at seeded random moments
/// over the Vimeo streaming flow, the tus flow, an SFTP tree upload, a persistent SFTP session
/// with paths added over time and a chain of exec steps, each killed run resumed until it
/// finishes. The tool checks the server's bytes (sha256), one video per idempotency key, every
/// path finished exactly once, each exec step's effect once (plus the repeats at-least-once
/// allows), no process of a killed step alive a second after the kill, no stuck run, and
/// `PRAGMA integrity_check`. A random seed each time (printed; set
/// ORCHESTRATE_CRASH_SEED to repeat one); bench/crash runs the long campaign. With
/// ORCHESTRATE_TEST_STORE=postgres the same campaign runs on a PostgreSQL store (`--store`), where
/// the tool checks instead that every run succeeded and none is left owned.
@Suite struct CrashCampaignTests {
    @Test func twentyFourKillsAcrossTheFiveFlowsLoseAndDuplicateNothing() throws {
        let dir = TemporaryDirectory("crash-campaign")
        let seed = ProcessInfo.processInfo.environment["ORCHESTRATE_CRASH_SEED"].flatMap { Int($0) }
            ?? Int.random(in: 1 ... 1 << 30)
        print("crash campaign seed \(seed) (repeat with ORCHESTRATE_CRASH_SEED=\(seed))")
        let report = dir.file("report.json").path, log = dir.file("campaign.log").path
        let tool = TestPaths.packageRoot.appendingPathComponent("tools/crash_campaign.py").path
        let store = EngineTestStore.usesPostgres ? ["--store", EngineTestStore.freshDatabase()] : []
        let child = try SpawnedChild(["/usr/bin/env", "python3", tool, "--bin-dir", TestPaths.productsDir.path,
                                      "--seed", "\(seed)", "--kills", "24", "--report", report] + store,
                                     stdout: dir.file("stdout").path, stderr: log)
        let status = child.wait(timeout: 600)
        let output = (try? String(contentsOfFile: log, encoding: .utf8)) ?? ""
        #expect(status == 0, "crash campaign seed \(seed) failed (status \(status.map(String.init) ?? "timeout")):\n\(output.suffix(6000))")
        let json = try JSONValue(parsing: try String(contentsOfFile: report, encoding: .utf8))
        #expect(json["violations"]?.arrayValue?.isEmpty == true, "seed \(seed): \(json["violations"]?.jsonText ?? "")")
        // The campaign did what it says: every kill happened and every run's files were checked.
        #expect(json["total"]?["kills"]?.intValue == 24, "seed \(seed): \(json.jsonText)")
        #expect(json["store"]?.stringValue == (EngineTestStore.usesPostgres ? "postgresql" : "sqlite"))
        for name in ["vimeo", "tus", "sftp-tree", "sftp-persistent", "exec-chain"] {
            let figures = json["scenarios"]?[name]
            #expect((figures?["runs"]?.intValue ?? 0) >= 1, "seed \(seed): \(name) ran no run")
            #expect((figures?["files_verified"]?.intValue ?? 0) >= 1, "seed \(seed): \(name) verified no file")
            #expect((figures?["resent_bytes"]?.intValue ?? -1) >= 0, "seed \(seed): \(name) byte accounting: \(figures?.jsonText ?? "")")
        }
        print("crash campaign seed \(seed): \(json["total"]?.jsonText ?? "")")
    }
}
