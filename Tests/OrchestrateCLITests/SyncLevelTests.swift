import Foundation
import OrchestrateTestSupport
import Testing

/// `ORCHESTRATE_SYNC` picks the SQLite store's commit level; the store test
/// (`SQLiteStateStoreTests.commitsAtTheSyncLevelAskedFor`) checks the level reaches the writer.
@Suite struct SyncLevelTests {
    let h = Harness()

    @Test(.sqliteStoreOnly("ORCHESTRATE_SYNC is the SQLite store's setting"))
    func aSyncLevelThatIsNeitherIsRefusedBeforeTheStoreIsTouched() throws {
        let state = h.path("typo")
        let typo = try ChildProcess.orchestrate(["list", "--state", state], environment: ["ORCHESTRATE_SYNC": "fulll"])
        #expect(typo.status == 2, "\(typo.stdout)\n\(typo.stderr)")
        #expect(typo.stderr.contains("ORCHESTRATE_SYNC must be normal or full, not 'fulll'"), "\(typo.stderr)")
        #expect(!FileManager.default.fileExists(atPath: state), "no store made for a refused setting")
        for setting in ["FULL", "normal", ""] {
            let fine = try ChildProcess.orchestrate(["list", "--state", h.path("ok-\(setting)")], environment: ["ORCHESTRATE_SYNC": setting])
            #expect(fine.status == 0, "ORCHESTRATE_SYNC=\(setting): \(fine.stderr)")
        }
    }
}
