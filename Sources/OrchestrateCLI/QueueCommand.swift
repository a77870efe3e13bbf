import ArgumentParser
import OrchestrateStore
import OrchestrateTokenBucket

struct QueueCommand: ParsableCommand {
    static let configuration = CommandConfiguration(
        commandName: "queue",
        abstract: "Make the queue passive (stop) or active again (start); set every serve's bandwidth cap (rate) or how long finished runs are kept (retention).",
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

            `queue retention PERIOD` sets how long finished runs are kept before `serve` prunes \
            them (default 30d; `off` keeps them until `orchestrate prune`), for the whole store or, \
            with --queue NAME, for one named queue; `reset` removes the setting; alone, it shows \
            them. A workflow's own `retention:` wins over both.

            Examples:
              orchestrate queue stop         # e.g. while the remote end is down
              orchestrate queue start
              orchestrate queue stop --queue uploads     # downloads go on
              orchestrate queue start --queue uploads
              orchestrate queue rate 20M
              orchestrate queue rate "08:00,512K 23:00,off"
              orchestrate queue rate reset
              orchestrate queue retention 14d
              orchestrate queue retention 2d --queue scratch
              orchestrate queue retention
            """)

    enum Action: String, ExpressibleByArgument, CaseIterable { case stop, start, rate, retention }

    @Argument(help: "stop, start, rate or retention.") var action: Action
    @Argument(help: ArgumentHelp("For rate: the new cap, or reset. For retention: the period (30d, off), or reset.", valueName: "value"))
    var rate: String?
    @Option(name: .customLong("queue"), help: ArgumentHelp("For stop, start and retention: only this named queue.", valueName: "name"))
    var queue: String?
    @OptionGroup var global: GlobalOptions

    func validate() throws {
        if rate != nil && action != .rate && action != .retention { throw ValidationError("queue \(action.rawValue) takes no value (did you mean `queue rate \(rate!)`?)") }
        if let rate, rate != "reset" {
            if action == .retention { _ = try RetentionPeriod.seconds(rate, allowOff: true) } else { _ = try MaxRateOption.parse(rate) }
        }
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
        case .retention:
            try retention(store)
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

    /// `queue retention [PERIOD|off|reset] [--queue NAME]`.
    private func retention(_ store: any StateStore) throws {
        guard let value = rate else {
            let settings = try store.retentionSettings()
            Terminal.line("retention \(RetentionPeriod.text(settings.period))"
                + (settings.storeWide == nil ? " (the default)" : "") + ": finished runs are pruned once this old")
            for (name, seconds) in settings.queues.sorted(by: { $0.key < $1.key }) {
                Terminal.line("retention \(RetentionPeriod.text(seconds)) for queue \(name)")
            }
            return
        }
        let scope = queue.map { "queue \($0)" } ?? "the store"
        if value == "reset" {
            try store.setRetention(nil, queue: queue)
            Terminal.line("retention of \(scope) removed: " + (queue == nil ? "the default (30d) applies" : "the store's applies"))
        } else {
            let seconds = try RetentionPeriod.seconds(value, allowOff: true)
            try store.setRetention(seconds, queue: queue)
            Terminal.line(seconds.isInfinite ? "retention of \(scope) off: finished runs are kept until `orchestrate prune`"
                                             : "retention of \(scope): finished runs are pruned \(RetentionPeriod.text(seconds)) after they end")
        }
    }
}
