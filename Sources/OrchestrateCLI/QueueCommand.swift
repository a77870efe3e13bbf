import ArgumentParser
import OrchestrateStore
import OrchestrateTokenBucket

struct QueueCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queue",
        abstract: "Make the queue passive (stop) or active again (start); change the bandwidth cap of every serve (rate).",
        discussion: """
            `queue stop` interrupts the runs in flight (they keep their place) and starts nothing; \
            `queue start` picks up the same runs where they were. Affects every `serve` on the store. \
            With `--queue NAME`, only that named queue stops (or starts again): the serves go on \
            with their other queues. A queue stopped by name stays stopped through a store-wide \
            `queue start`, until `queue start --queue NAME`.

            `queue rate R` replaces the --max-rate of every `serve` on the store, within a second \
            and for the transfers already running: a rate (20M, off) or a timetable \
            ("Mon-Fri 08:00,10M 19:00,off"). It stays in the store, for serves started later too, \
            until `queue rate reset` gives each serve its own --max-rate back. `queue rate` alone \
            shows it. A run's own --max-rate still holds on top.

            Examples:
              orchestrate queue stop         # e.g. while the remote end is down
              orchestrate queue start
              orchestrate queue stop --queue uploads     # downloads go on
              orchestrate queue start --queue uploads
              orchestrate queue rate 20M
              orchestrate queue rate "08:00,512K 23:00,off"
              orchestrate queue rate reset
            """)

    enum Action: String, ExpressibleByArgument, CaseIterable { case stop, start, rate }

    @Argument(help: "stop, start or rate.") var action: Action
    @Argument(help: ArgumentHelp("For rate: the new cap, or reset.", valueName: "rate")) var rate: String?
    @Option(name: .customLong("queue"), help: ArgumentHelp("For stop and start: only this named queue.", valueName: "name"))
    var queue: String?
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if rate != nil && action != .rate { throw ValidationError("queue \(action.rawValue) takes no value (did you mean `queue rate \(rate!)`?)") }
        if let rate, rate != "reset" { _ = try MaxRateOption.parse(rate) }
        if let queue {
            if action == .rate { throw ValidationError("--queue is for stop and start; queue rate applies to every serve of the store") }
            if !QueueName.isValid(queue) { throw ValidationError("--queue \(queue): \(QueueName.rule)") }
        }
    }

    func run() throws {
        let store = try global.openStore()
        switch action {
        case .stop, .start:
            if let queue {
                try store.setQueuePassive(action == .stop, queue: queue)
                Terminal.line(action == .stop ? "queue \(queue) stopped: passive until `orchestrate queue start --queue \(queue)`"
                                              : "queue \(queue) started")
                return
            }
            try store.setQueuePassive(action == .stop)
            Terminal.line(action == .stop ? "queue stopped: passive until `orchestrate queue start`" : "queue started")
        case .rate:
            guard let rate else {
                Terminal.line(try store.queueRate().map { "queue rate \($0) (every serve of the store)" }
                    ?? "no queue rate: each serve follows its own --max-rate")
                return
            }
            if rate == "reset" {
                try store.setQueueRate(nil)
                Terminal.line("queue rate removed: each serve follows its own --max-rate again")
            } else {
                let timetable = try MaxRateOption.parse(rate)
                try store.setQueueRate(timetable.text)
                Terminal.line("queue rate \(timetable.text): every serve of the store applies it within a second")
            }
        }
    }
}
