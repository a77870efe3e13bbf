import OrchestrateJSON
import OrchestrateStore

/// A run taken over from another node (its owner died or lost its lease): what that node kept
/// on its own disk is not here.
///
/// The rule, written down in docs/several-machines.md: a succeeded step that ran on another
/// node runs again here when its `with:` reads `${{ run.dir }}` (its results are files in that
/// node's run directory) and a step still to run reads the run directory too (it needs them).
/// Steps whose effect is elsewhere (an API call, an upload: the server holds the result) are
/// not repeated; sessions are reopened by `reopenSessionsOnResume`. Fan-out items are not
/// redone one by one: a `for_each` step over run-directory files should be followed by a step
/// that checks them.
extension RunExecutor {
    /// The run moved here from another node (the claim says whose it was): journal it, whether
    /// or not that node had started anything.
    func noteTakeover() {
        if let previous = run.takenFrom, previous.node != owner.node {
            emit(.runTakenOver, step: nil, data: ["from": .string(previous.node), "node": .string(owner.node)])
        }
    }

    func redoStepsFromOtherNodes() {
        let stillNeeded = workflow.steps.contains { step in
            !(instances[step.id]?.record.status.isFinished ?? true) && step.with.readsRunDirectory
        }
        guard stillNeeded else { return }
        for step in workflow.steps where step.with.readsRunDirectory {
            guard let instance = instances[step.id], instance.record.kind == .step, instance.record.status == .succeeded,
                  let node = instance.record.node, node != owner.node
            else { continue }
            runAgain(instance)
            emit(.stepRedone, step: step.id,
                 data: ["node": .string(node), "reason": .string("its results were in the run directory of node \(node)")])
        }
    }

    /// Makes a succeeded step pending again, journaled in this round: on resume, before the
    /// scheduling state is built, so its dependents wait for it.
    func runAgain(_ instance: Instance) {
        instance.record.status = .pending
        instance.record.outputs = nil
        instance.record.finishedAt = nil
        instance.record.completionSeq = nil
        instance.materialized = true
        batch.stepUpserts.append(instance.record)
    }
}
