import ArgumentParser
import Foundation
import OrchestrateStore

struct StatusCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "status",
        abstract: "Show a run: its state, each step's state and attempts, errors and outputs.",
        discussion: "A run whose process died shows as `interrupted`: continue it with `orchestrate resume RUN`.")

    @Argument(help: "The run id.")
    var runID: String

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let store = try global.openStore()
        guard let run = try store.run(runID) else { throw CLIFailure.usage("no run \(runID) in \(global.resolvedStateDirectory())") }
        let steps = try store.steps(ofRun: runID)
        if global.json {
            Terminal.line(RunDisplay.json(run, steps: steps).jsonText)
            return
        }
        Terminal.line(Terminal.styled("run \(run.id)", .bold) + "  \(RunDisplay.effectiveStatus(run))")
        Terminal.line("workflow  \(run.workflowName) (\(run.workflowFile))")
        Terminal.line("created   \(RunDisplay.time(run.createdAt))   started \(RunDisplay.time(run.startedAt))   finished \(RunDisplay.time(run.finishedAt))")
        if !run.labels.isEmpty { Terminal.line("labels    " + run.labels.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }.joined(separator: " ")) }
        if let error = run.error { Terminal.line("error     \(error)") }
        Terminal.line("")
        for step in steps.sorted(by: RunDisplay.stepOrder) {
            var line = "  \(step.id.padding(24)) \(step.status.rawValue.padding(13)) attempt \(step.attempt)"
            if let message = step.errorMessage, step.status != .succeeded { line += "  \(step.errorKind ?? "error"): \(message)" }
            Terminal.line(line)
        }
        if let outputs = run.outputs?.objectValue, !outputs.isEmpty {
            Terminal.line("\noutputs")
            for key in outputs.keys.sorted() { Terminal.line("  \(key): \(outputs[key]!.interpolated)") }
        }
    }
}
