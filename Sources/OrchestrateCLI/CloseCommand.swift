import ArgumentParser

struct CloseCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "close",
        abstract: "End a run's persistent sessions cleanly, once their queued paths are transferred.",
        discussion: """
            Unlike `cancel`, nothing is interrupted: the sessions finish what was added, then end.

            Examples:
              orchestrate add-path RUN last.mov in/last.mov && orchestrate close RUN
              orchestrate close RUN && orchestrate status RUN --watch   # see it drain
            """)

    @Argument(help: "The run id.")
    var runID: String

    @OptionGroup var global: GlobalOptions

    func run() throws { try ControlVerb.run(.close, runID: runID, global: global) }
}
