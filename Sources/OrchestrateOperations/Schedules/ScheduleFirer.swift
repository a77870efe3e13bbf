import Foundation
import OrchestrateEngine
import OrchestrateJSON
import OrchestrateLock
import OrchestrateModel
import OrchestrateStore

/// `serve`'s schedule firer: starts the runs of registered schedules (`orchestrate schedule add`)
/// at their times, on a thread of its own beside the queue worker, which then executes them
/// like any submitted run.
///
/// Every due time of every entry is dealt with exactly once, across every `serve` sharing the
/// store: the firer computes it from the entry's `lastDue`, decides, and asks the store to
/// move `lastDue` to it (`StateStore.advanceSchedule`, a compare-and-set in the transaction
/// that creates the run). Whoever loses that race just reads the schedules again.
///
/// What a due time does:
/// - **started**: a queued run with the entry's inputs, labelled `schedule=NAME`;
/// - **skipped** (`schedule.skipped`): `overlap: skip` and the previous run still going;
/// - **waits**: `overlap: queue` and the previous run still going: it starts once that ends;
/// - **missed** (`schedule.missed`): older than the entry's `catchup` (or, without one, than
///   `grace`) when the firer gets to it: the times that passed while no `serve` ran.
///   With `overlap: queue`, age is counted from when the previous run ended, so waiting
///   for it does not make a time missed.
///
/// Between due times it sleeps until the next one (reading the schedules again every
/// `rereadInterval`, for entries registered meanwhile); with an injected clock it looks at the
/// clock every 50 ms instead.
public final class ScheduleFirer: @unchecked Sendable {
    public struct Options: Sendable {
        /// How late a time may be started without `catchup`: a busy store or a slow wake-up
        /// must not lose a run, but a `serve` that was down for an hour does not start it.
        public var grace: Double = 30
        /// How often the schedules are read again when nothing is due sooner.
        public var rereadInterval: Double = 20
        /// How often an `overlap: queue` time looks whether the run it waits for has ended.
        public var waitingInterval: Double = 1
        public var warn: @Sendable (String) -> Void = { _ in }

        public init() {}
    }

    private let store: any StateStore
    private let clock: ScheduleClock
    private let options: Options
    private let observer: (any RunObserver)?
    private let signal = MonotonicCondition()
    private var stopping = false
    private var stopped = false
    /// Entries whose cron or zone no longer parse, already warned about.
    private var warnedAbout: Set<String> = []

    public init(store: any StateStore, clock: ScheduleClock, options: Options = Options(), observer: (any RunObserver)? = nil) {
        self.store = store
        self.clock = clock
        self.options = options
        self.observer = observer
    }

    /// Starts the firer's thread.
    public func start() {
        let thread = Thread { [self] in
            loop()
            signal.withLock {
                stopped = true
                signal.broadcast()
            }
        }
        thread.name = "schedule-firer"
        thread.start()
    }

    /// Stops the loop and returns once it has (a run it was creating is created or not, whole).
    public func shutdown() {
        signal.withLock {
            stopping = true
            signal.broadcast()
            while !stopped { signal.wait() }
        }
    }

    private func loop() {
        var failing = false
        while !signal.withLock({ stopping }) {
            var wait: Double
            do {
                let now = try clock.now()
                let next = try tick(now: now)
                wait = max(0, next - now)
                if failing { options.warn("the schedule firer's store answers again") }
                failing = false
            } catch {
                if !failing { options.warn("the schedule firer could not read the schedules (\(error)); retrying") }
                failing = true
                wait = 1
            }
            if clock.testFile != nil { wait = min(wait, 0.05) }
            signal.withLock {
                if !stopping { _ = signal.wait(seconds: wait) }
            }
        }
    }

    /// Deals with every due time up to `now`; returns when to look again (clock seconds).
    func tick(now: Double) throws -> Double {
        var next = now + options.rereadInterval
        for entry in try store.schedules() where !entry.paused {
            let key = "\(entry.name)#\(entry.entry)"
            guard let cron = try? CronExpression.parse(entry.cron), let zone = TimeZone(identifier: entry.timeZone) else {
                if warnedAbout.insert(key).inserted {
                    options.warn("schedule \(key): cannot read cron '\(entry.cron)' in zone '\(entry.timeZone)'; register it again")
                }
                continue
            }
            if let wake = try handle(entry, cron, zone, now: now) { next = min(next, wake) }
        }
        return next
    }

    /// The due times of one entry up to `now`; returns when the entry next needs a look.
    private func handle(_ original: ScheduleRecord, _ cron: CronExpression, _ zone: TimeZone, now: Double) throws -> Double? {
        var entry = original
        let queueOverlap = entry.overlap == ScheduleOverlap.queue.rawValue
        let window = entry.catchup ?? options.grace
        while let due = cron.nextTime(after: entry.lastDue, in: zone) {
            if Double(due) > now { return Double(due) }
            let previous = try entry.lastRunID.flatMap { try store.run($0) }
            let previousActive = previous.map { !$0.status.isFinished } ?? false
            if previousActive && queueOverlap { return now + options.waitingInterval }
            let since = max(Double(due), queueOverlap ? previous?.finishedAt ?? 0 : 0)
            let outcome: Bool
            var journaled: [EventRecord] = []
            if now - since > window {
                // Missed: this time and every later one as old, journaled together.
                var last = due
                var count = 1
                while let later = cron.nextTime(after: last, in: zone), now - max(Double(later), since) > window {
                    last = later
                    count += 1
                }
                journaled = [event(.scheduleMissed, entry, due, ["last": .string(Self.iso(last)), "count": .int(Int64(count)),
                                                                 "window_seconds": .double(window)])]
                outcome = try store.advanceSchedule(name: entry.name, entry: entry.entry, from: entry.lastDue, to: last,
                                                    run: nil, events: journaled)
                entry.lastDue = last
            } else if previousActive {
                journaled = [event(.scheduleSkipped, entry, due, ["running": .string(previous?.id ?? "")])]
                outcome = try store.advanceSchedule(name: entry.name, entry: entry.entry, from: entry.lastDue, to: due,
                                                    run: nil, events: journaled)
                entry.lastDue = due
            } else {
                let (run, events) = Self.runRecord(for: entry, due: due)
                journaled = events
                outcome = try store.advanceSchedule(name: entry.name, entry: entry.entry, from: entry.lastDue, to: due,
                                                    run: (run, events), events: [])
                entry.lastDue = due
                entry.lastRunID = run.id
            }
            // Another serve dealt with it first (or the entry was paused or removed): read again.
            guard outcome else { return now }
            if let observer { journaled.forEach(observer.runEvent) }
        }
        return nil
    }

    private func event(_ type: EventType, _ entry: ScheduleRecord, _ due: Int64, _ extra: [String: JSONValue]) -> EventRecord {
        var data: [String: JSONValue] = ["schedule": .string(entry.name), "entry": .int(Int64(entry.entry)),
                                         "due": .string(Self.iso(due))]
        data.merge(extra) { a, _ in a }
        return EventRecord(runID: nil, time: Date().timeIntervalSince1970, type: type, data: .object(data))
    }

    /// The queued run a due time starts: its id carries the due time, its labels the schedule.
    static func runRecord(for entry: ScheduleRecord, due: Int64) -> (RunRecord, [EventRecord]) {
        queuedRun(for: entry, at: Double(due), labels: ["scheduled_for": iso(due)], added: ["due": .string(iso(due))])
    }

    /// The queued run `orchestrate schedule run` starts now: what a firing of `entry` starts (its
    /// workflow, inputs, queue and priority), labelled `trigger=manual` instead of with a due
    /// time. The schedule's own times are left as they are.
    public static func manualRunRecord(for entry: ScheduleRecord, now: Double) -> (RunRecord, [EventRecord]) {
        queuedRun(for: entry, at: now, labels: ["trigger": "manual"], added: ["trigger": "manual"])
    }

    private static func queuedRun(for entry: ScheduleRecord, at idTime: Double, labels: [String: String],
                                  added: [String: JSONValue]) -> (RunRecord, [EventRecord])
    {
        let id = RunIDs.make(now: Date(timeIntervalSince1970: idTime))
        let now = Date().timeIntervalSince1970
        var run = RunRecord(id: id, workflowName: entry.workflowName, workflowFile: entry.workflowFile,
                            workflowSource: entry.workflowSource, inputs: entry.inputs, status: .queued, createdAt: now,
                            runDir: RunRecord.runDirectory(for: id), priority: entry.priority,
                            labels: labels.merging(["schedule": entry.name]) { a, _ in a })
        run.queue = entry.queue
        // The workflow's own `retention:`, from the text registered (checked when it was).
        run.retention = (try? WorkflowLoader.parse(source: entry.workflowSource, file: entry.workflowFile, catalog: nil,
                                                  remotes: RemotesFile()))?.retention
        var data: [String: JSONValue] = ["workflow": .string(entry.workflowName), "file": .string(entry.workflowFile),
                                         "schedule": .string(entry.name), "entry": .int(Int64(entry.entry))]
        data.merge(added) { a, _ in a }
        return (run, [EventRecord(runID: id, time: now, type: .runAdded, data: .object(data))])
    }

    /// `2026-11-23T02:00:00Z`
    public static func iso(_ time: Int64) -> String {
        let w = WallTime(utcSeconds: time)
        let seconds = Int(((time % 60) + 60) % 60)
        return "\(w.description.replacingOccurrences(of: " ", with: "T")):\(seconds < 10 ? "0" : "")\(seconds)Z"
    }
}
