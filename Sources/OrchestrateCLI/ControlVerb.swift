import OrchestrateEngine
import OrchestrateOperations

/// What every control verb command does: apply the verb through `QueueControl`, print the
/// outcome, turn a refusal into exit status 2.
enum ControlVerb {
    static func run(_ verb: QueueControl.Verb, runID: String, global: GlobalOptions) throws {
        let store = try global.openStore()
        do {
            Terminal.line(try QueueControl(store: store, stateDirectory: global.resolvedStateDirectory()).apply(verb, to: runID))
        } catch let refusal as QueueControl.Refusal {
            throw CLIFailure.usage(refusal.description)
        }
    }
}
