import OrchestrateJSON
import OrchestrateModel
import OrchestratePluginHost
import OrchestrateStore

/// Session steps (ORC_STEP_OPENS_SESSION, e.g. `sftp.connect`): their outputs name a live,
/// process-local resource — a connection — that later steps of the run use. Two rules follow:
///
/// - on resume, such a step that succeeded in a dead process is run again if any step that needs
///   it has not finished (its journaled outputs name a connection that no longer exists);
/// - the session is closed (the step type's `close_session`) as soon as every step that needs it
///   has finished, and at the latest when the run ends.
extension RunExecutor {
    func opensSession(_ step: Step) -> Bool {
        registry.stepType(step.uses)?.opensSession ?? false
    }

    /// Before the scheduling bookkeeping of a resumed run: session steps that later steps still
    /// need go back to `pending`, ready to run again.
    func reopenSessionsOnResume() {
        for step in workflow.steps where opensSession(step) {
            guard let instance = instances[step.id], instance.record.status == .succeeded else { continue }
            let stillNeeded = dependencies.dependents(of: step.id).contains { !(instances[$0]?.record.status.isFinished ?? true) }
            guard stillNeeded else { continue }
            runAgain(instance)
            emit(EventType.sessionReopening, step: step.id,
                 data: ["reason": .string("its connection belonged to the interrupted process")])
        }
    }

    /// A session step succeeded in this process: remember what to close.
    func sessionOpened(_ instance: Instance) {
        guard let step = workflow.step(instance.record.step), opensSession(step),
              let type = registry.stepType(step.uses)
        else { return }
        openSessions[step.id] = (type, instance.record.outputs ?? [:])
        closeSessionIfUnneeded(step.id)
    }

    /// After a declared step finished: close the sessions it needed that nothing else needs.
    func releaseSessions(neededBy stepID: String) {
        for need in workflow.step(stepID)?.needs ?? [] where openSessions[need] != nil {
            closeSessionIfUnneeded(need)
        }
    }

    private func closeSessionIfUnneeded(_ sessionStep: String) {
        let open = dependencies.dependents(of: sessionStep).contains { !(instances[$0]?.record.status.isFinished ?? true) }
        if !open { closeSession(sessionStep) }
    }

    func closeAllSessions() {
        for id in openSessions.keys.sorted() { closeSession(id) }
    }

    private func closeSession(_ id: String) {
        guard let (type, outputs) = openSessions.removeValue(forKey: id) else { return }
        type.closeSession(outputs: outputs)
        emit(EventType.sessionClosed, step: id, data: [:])
    }
}
