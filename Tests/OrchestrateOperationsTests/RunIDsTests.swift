import Foundation
import OrchestrateEngine
import OrchestrateOperations
import Testing

/// Run ids name runs in the store, the CLI and the API: a collision fails a whole
/// `submit --batch` (its runs are one transaction).
@Suite struct RunIDsTests {
    @Test func idsMadeInOneSecondAreAllDifferentAndSortByTime() {
        let second = Date(timeIntervalSince1970: 1_790_000_000)
        let ids = (0..<50_000).map { _ in RunIDs.make(now: second) }
        #expect(Set(ids).count == ids.count)
        #expect(ids.allSatisfy { $0.hasPrefix("20260921-") })
        let later = RunIDs.make(now: second.addingTimeInterval(1))
        #expect(ids.allSatisfy { $0 < later })
    }

    @Test func anIdIsTheUTCSecondAndEightLettersThatReadUnambiguously() {
        let id = RunIDs.make(now: Date(timeIntervalSince1970: 1_790_000_000))
        let parts = id.split(separator: "-")
        #expect(parts.count == 3)
        #expect(parts[0] == "20260921" && parts[1].count == 6)
        #expect(parts[2].count == 8)
        #expect(parts[2].allSatisfy { "abcdefghijkmnpqrstuvwxyz23456789".contains($0) })
    }
}
