import ArgumentParser
import OrchestrateStore

struct CloseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "close",
        abstract: "End a run's persistent sessions cleanly, once their queued paths are transferred.",
        discussion: "Unlike `cancel`, nothing is interrupted: the sessions finish what was added, then end.")

    @Argument(help: "The run id.")
    var runID: String

    @OptionGroup var global: GlobalOptions

    func run() throws {
        let store = try global.openStore()
        guard let run = try store.run(runID) else { throw CLIFailure.usage("no run \(runID)") }
        guard !run.status.isFinished else { throw CLIFailure.usage("run \(runID) already finished (\(run.status.rawValue))") }
        try store.requestControl(runID, control: .close)
        Terminal.line("close requested for \(runID)")
    }
}
