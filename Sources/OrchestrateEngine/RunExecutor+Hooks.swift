import Foundation
import OrchestrateJSON
import OrchestrateModel
import OrchestratePluginHost
import OrchestrateStore

/// `on_finish:` notifications: after the run's final status is journaled, each hook whose
/// `when` matches is called once through its plugin (`exec` runs a command, `http.request` POSTs).
/// A hook's failure is journaled (`hook.failed`) but changes nothing about the run.
extension RunExecutor {
    static let defaultHookTimeout: Duration = .seconds(30)

    func runFinishHooks() {
        let status = run.status.rawValue
        let hooks = workflow.onFinish.enumerated().filter { $0.element.when.contains(status) }
        guard !hooks.isEmpty else { return }
        var context = evaluationContext(item: nil, attempt: 1, secrets: resolveSecrets())
        context.run = ["id": .string(run.id), "dir": .string(runDirectory), "attempt": 1, "status": .string(status),
                       "error": run.error.map(JSONValue.string) ?? .null]
        for (index, hook) in hooks {
            let name = "on_finish[\(index)]"
            let outcome = callHook(hook, name: name, context: context)
            switch outcome {
            case .success:
                emit(EventType.hookSucceeded, step: name, data: ["uses": .string(hook.uses)])
            case .failure(let failure):
                emit(EventType.hookFailed, step: name,
                     data: ["uses": .string(hook.uses), "kind": .string(failure.kind.rawValue),
                            "error": .string(redactor.redact(failure.message))])
            }
        }
    }

    private func callHook(_ hook: FinishHook, name: String, context: EvaluationContext) -> Result<Void, StepFailure> {
        let inputs: JSONValue
        do {
            inputs = try hook.with.evaluate(in: context)
        } catch {
            return .failure(StepFailure(kind: .invalidInput, code: "expression", message: "\(error)", retryAfter: nil))
        }
        guard let type = registry.stepType(hook.uses) else {
            return .failure(StepFailure(kind: .permanent, code: "unknown_step_type",
                                        message: "no loaded plugin provides step type '\(hook.uses)'", retryAfter: nil))
        }
        let request = StepRequest(runID: run.id, stepID: name, inputs: inputs, idempotencyKey: nil, runDir: runDirectory,
                                  attempt: 1, timeout: hook.timeout ?? Self.defaultHookTimeout, checkpoint: nil)
        let delegate = AttemptDelegate(runID: run.id, instanceID: name, declaredStep: name, store: store, owner: owner,
                                       redactor: redactor, sink: self)
        // On this thread: the run is over, nothing else is scheduled.
        return StepInvocation(stepType: type, request: request, delegate: delegate).run().map { _ in () }
    }
}
