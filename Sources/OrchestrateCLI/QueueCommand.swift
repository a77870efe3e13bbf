import ArgumentParser

struct QueueCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queue",
        abstract: "Make the queue passive (stop) or active again (start).",
        discussion: """
            `queue stop` interrupts the runs in flight (they keep their place) and starts nothing; \
            `queue start` picks up the same runs where they were. Affects every `serve` on the store.

            Examples:
              orchestrate queue stop         # e.g. while the remote end is down
              orchestrate queue start
            """)

    enum Action: String, ExpressibleByArgument, CaseIterable { case stop, start }

    @Argument(help: "stop or start.") var action: Action
    @OptionGroup var global: GlobalOptions

    func run() throws {
        let store = try global.openStore()
        try store.setQueuePassive(action == .stop)
        Terminal.line(action == .stop ? "queue stopped: passive until `orchestrate queue start`" : "queue started")
    }
}
