import OrchestrateEngine
import OrchestrateOperations
import OrchestrateStore

/// The RUN argument of `status`, `events` and `resume` (the control verbs and `add-path` are
/// checked by `QueueControl` and `SessionPaths`): an id that breaks the run id rule is refused
/// with exit status 2, saying whether the store holds such a run (one made by a version that
/// did not check ids, which nothing acts on).
enum RunArgument {
    static func check(_ id: String, store: any StateStore) throws {
        guard !RunID.isValid(id) else { return }
        throw CLIFailure.usage(RunID.Invalid(id: id, stored: (try? store.run(id)) != nil).description)
    }

    static func check(_ id: String, reader: any RunReader) throws {
        guard !RunID.isValid(id) else { return }
        let stored = (reader as? LocalRunReader).map { (try? $0.store.run(id)) != nil } ?? false
        throw CLIFailure.usage(RunID.Invalid(id: id, stored: stored).description)
    }
}
