import OrchestrateStore
import OrchestrateTestSupport

/// The two stores a test runs on (`@Test(arguments: StoreKind.allCases)`).
enum StoreKind: String, CaseIterable, Sendable {
    case sqlite, postgres

    /// A new, empty store of this kind: SQLite in `dir`'s folder `name`, PostgreSQL as a new
    /// database of the shared throwaway cluster.
    func open(in dir: TemporaryDirectory, _ name: String = "state") throws -> any StateStore {
        switch self {
        case .sqlite: return try StoreOpening.open(.sqlite(directory: dir.file(name).path))
        case .postgres: return try StoreOpening.open(.postgres(connection: try PostgresServer.shared().createDatabase()))
        }
    }
}
