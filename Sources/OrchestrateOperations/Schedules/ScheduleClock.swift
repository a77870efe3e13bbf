import Foundation
import OrchestrateEngine
import OrchestrateStore

/// The clock schedules are judged by: the store's (the database server's on PostgreSQL, as for
/// leases), so nodes whose clocks disagree still agree on when a time is due.
///
/// Tests inject time instead: with `ORCHESTRATE_TEST_CLOCK_FILE=PATH` every command reads
/// "now" (seconds since 1970) from that file, and `serve` looks at it again every 50 ms rather
/// than sleeping until the next due time, so a test moves time on by rewriting the file.
public struct ScheduleClock: Sendable {
    public static let testFileVariable = "ORCHESTRATE_TEST_CLOCK_FILE"

    private let store: any StateStore
    /// The injected clock's file, or nil for the real one.
    public let testFile: String?

    public init(store: any StateStore, environment: [String: String] = ProcessInfo.processInfo.environment) {
        self.store = store
        testFile = environment[Self.testFileVariable].flatMap { $0.isEmpty ? nil : $0 }
    }

    /// Seconds since 1970.
    public func now() throws -> Double {
        guard let testFile else { return try store.now() }
        let text = try String(contentsOfFile: testFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        guard let value = Double(text) else {
            throw InjectedClockError(description: "\(Self.testFileVariable) file \(testFile) holds '\(text)', not seconds since 1970")
        }
        return value
    }

    public struct InjectedClockError: Error, CustomStringConvertible { public let description: String }
}
