import ArgumentParser

struct UnpauseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "unpause",
        abstract: "Continue a paused run where it was.",
        discussion: """
            Examples:
              orchestrate unpause RUN
              orchestrate list --status paused                # which runs wait
            """)

    @Argument(help: "The run id.") var runID: String
    @OptionGroup var global: GlobalOptions

    func run() throws { try ControlVerb.run(.unpause, runID: runID, global: global) }
}
