import ArgumentParser

struct RunNowCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "run-now",
        abstract: "Start a run at once, pre-empting the newest running run if the queue is full.",
        discussion: """
            The pre-empted run goes back to the queue just behind it and resumes right after. A cancelled or \
            failed run is revived (as with retry).

            Examples:
              orchestrate run-now RUN
              orchestrate submit urgent.yaml | xargs orchestrate run-now
            """)

    @Argument(help: "The run id.") var runID: String
    @OptionGroup var global: GlobalOptions

    func run() throws { try ControlVerb.run(.runNow, runID: runID, global: global) }
}
