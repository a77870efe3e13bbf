import ArgumentParser

struct RetryCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "retry",
        abstract: "Queue a failed or cancelled run again; only what did not succeed runs.",
        discussion: """
            Steps that succeeded keep their outputs, unless a compensation undid them.

            Examples:
              orchestrate retry RUN
              orchestrate retry RUN && orchestrate status RUN --watch
            """)

    @Argument(help: "The run id.") var runID: String
    @OptionGroup var global: GlobalOptions

    func run() throws { try ControlVerb.run(.retry, runID: runID, global: global) }
}
