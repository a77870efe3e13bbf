import Foundation
import OrchestrateTestSupport
import Testing

/// Which store the engine tests run against. By default each `Harness` keeps its state in its
/// state directory (SQLite); with `ORCHESTRATE_TEST_STORE=postgres` each gets a database of its
/// own on the shared throwaway PostgreSQL cluster (`PostgresServer.shared()`), so the same tests
/// check the engine on both stores (scripts/test.sh runs the suite once per store).
enum EngineTestStore {
    struct DumpFailed: Error, CustomStringConvertible { let description: String }

    static let variable = "ORCHESTRATE_TEST_STORE"

    static let usesPostgres: Bool = {
        switch ProcessInfo.processInfo.environment[variable] ?? "" {
        case "", "sqlite": return false
        case "postgres", "postgresql": return true
        case let other: fatalError("\(variable) is '\(other)': set it to sqlite (the default) or postgres")
        }
    }()

    /// A new, empty database's URL. The tests cannot run on PostgreSQL without one, so a cluster
    /// that does not start stops the test process with the reason.
    static func freshDatabase() -> String {
        do {
            return try PostgresServer.shared().createDatabase(prefix: "engine")
        } catch {
            fatalError("\(variable)=postgres but no PostgreSQL database: \(error)")
        }
    }

    /// The whole PostgreSQL database as SQL text (pg_dump), for tests that check what the store
    /// holds, as they scan the SQLite file.
    static func dump(_ url: String) throws -> String {
        let result = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/pg_dump"), ["--no-owner", "-d", url])
        guard result.status == 0 else { throw DumpFailed(description: "pg_dump \(url): \(result.stderr)") }
        return result.stdout
    }
}

extension Trait where Self == ConditionTrait {
    /// For a test about the SQLite store itself (its file, its directory's disk): skipped, with
    /// `reason`, when the engine tests run on PostgreSQL.
    static func sqliteStoreOnly(_ reason: Comment) -> Self {
        .disabled(if: EngineTestStore.usesPostgres, reason)
    }
}
