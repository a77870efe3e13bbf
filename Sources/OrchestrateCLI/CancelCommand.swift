import ArgumentParser

struct CancelCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "cancel",
        abstract: "Cancel a run: interrupt it, run its compensations, and deactivate it.",
        discussion: """
            A cancelled run does not run again unless asked with `run-now` or `retry`. The process \
            executing the run acts within a second (`serve`) or two (`run`).

            Examples:
              orchestrate cancel RUN
              orchestrate cancel RUN && orchestrate status RUN   # see what was undone
            """)

    @Argument(help: "The run id.") var runID: String
    @OptionGroup var global: GlobalOptions

    func run() throws { try ControlVerb.run(.cancel, runID: runID, global: global) }
}
