import ArgumentParser

struct StopCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "stop",
        abstract: "Interrupt a run and put it back at the end of the queue, to run again later.",
        discussion: """
            Its finished steps are kept; the step that was running starts again from its checkpoint.

            Examples:
              orchestrate stop RUN
              orchestrate run-now OTHER_RUN    # or let another run go first
            """)

    @Argument(help: "The run id.") var runID: String
    @OptionGroup var global: GlobalOptions

    func run() throws { try ControlVerb.run(.stop, runID: runID, global: global) }
}
