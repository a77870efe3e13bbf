import ArgumentParser

struct DeleteCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "delete",
        abstract: "Remove a finished run and everything journaled about it.",
        discussion: """
            A run that has not finished is refused: cancel it first.

            Examples:
              orchestrate delete RUN
              orchestrate cancel RUN && orchestrate delete RUN     # an unfinished run
            """)

    @Argument(help: "The run id.") var runID: String
    @OptionGroup var global: GlobalOptions

    func run() throws { try ControlVerb.run(.delete, runID: runID, global: global) }
}
