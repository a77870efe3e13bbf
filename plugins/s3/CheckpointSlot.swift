import OrchestrateJSON
import OrchestratePluginKit

/// Where one object's transfer state is kept: the step's checkpoint itself (a single file), or
/// the entry of a tree's checkpoint for the file in progress (TreeJournal). An empty object
/// saved clears it.
struct CheckpointSlot {
    let load: () -> JSONValue?
    let save: (JSONValue) -> Void

    /// The step's own checkpoint.
    static func step(_ step: StepContext) -> CheckpointSlot {
        CheckpointSlot(load: { step.loadCheckpointJSON() }, save: { step.saveCheckpoint(json: $0) })
    }
}
