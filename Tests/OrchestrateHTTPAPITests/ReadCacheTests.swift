import Foundation
import NIOCore
@testable import OrchestrateHTTPAPI
import Testing

/// The read cache keeps an answer for its window and no longer: many distinct URLs (a query
/// parameter the API ignores, `?n=1`, `?n=2`…) asked once each leave nothing pinned once the
/// window has passed, even when nobody asks again; the live answers are capped.
@Suite struct ReadCacheTests {
    @Test func answersLeaveWhenTheirWindowHasPassedEvenWithoutAnotherRead() async throws {
        let cache = ReadCache(window: 0.05)
        for n in 0..<500 {
            _ = try await cache.answer("/api/runs?n=\(n)") { ByteBuffer(repeating: 7, count: 1024) }
        }
        #expect(cache.count > 0)
        try await Task.sleep(nanoseconds: 400_000_000)
        #expect(cache.count == 0, "\(cache.count) answers still held after their window")
    }

    @Test func identicalReadsWithinTheWindowShareOneAnswerAndTheLiveOnesAreCapped() async throws {
        let cache = ReadCache(window: 86_400)  // a suite under load can hold a test back for minutes
        let made = Counter()
        for _ in 0..<3 { _ = try await cache.answer("/api/runs") { made.add(); return ByteBuffer(repeating: 1, count: 8) } }
        #expect(made.value == 1)
        for n in 0..<(ReadCache.maxEntries + 50) {
            _ = try await cache.answer("/api/runs?n=\(n)") { ByteBuffer(repeating: 1, count: 8) }
        }
        #expect(cache.count == ReadCache.maxEntries)
    }

    final class Counter: @unchecked Sendable {
        private let lock = NSLock()
        private var n = 0
        var value: Int { lock.withLock { n } }
        func add() { lock.withLock { n += 1 } }
    }
}
