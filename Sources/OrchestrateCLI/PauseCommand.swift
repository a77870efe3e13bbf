import ArgumentParser

struct PauseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "pause",
        abstract: "Interrupt a run but keep its place and its slot (it blocks its queue) until unpause.",
        discussion: """
            A queued run that is paused does not start.

            Examples:
              orchestrate pause RUN
              orchestrate unpause RUN                # continues where it was
            """)

    @Argument(help: "The run id.") var runID: String
    @OptionGroup var global: GlobalOptions

    func run() throws { try ControlVerb.run(.pause, runID: runID, global: global) }
}
