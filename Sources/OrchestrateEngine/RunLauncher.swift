import Foundation
import OrchestrateJSON
import OrchestrateModel
import OrchestrateStore
import OrchestrateTokenBucket

/// Creates runs: an id and the journaled run record.
///
/// ```swift
/// let launcher = RunLauncher(store: store)
/// let run = try launcher.create(workflow, inputs: inputs)
/// let final = try RunExecutor(...).execute()
/// ```
public struct RunLauncher: Sendable {
    public let store: any StateStore

    public init(store: any StateStore) {
        self.store = store
    }

    /// Journals a new run of `workflow` with already validated `inputs`. `status` is `.queued`
    /// for `submit`, `.running` for `run` (which then executes it at once).
    public func create(_ workflow: Workflow, inputs: JSONValue, status: RunStatus = .running, id: String? = nil,
                       labels: [String: String] = [:], priority: Int = 0, maxRate: RateTimetable? = nil,
                       queue: String = "default") throws -> RunRecord
    {
        let (run, events) = try Self.record(workflow, inputs: inputs, status: status, id: id, labels: labels, priority: priority,
                                            maxRate: maxRate, queue: queue)
        try store.createRun(run, events: events)
        return run
    }

    /// Journals one run per element of `inputs`, all in one transaction (`submit --batch`):
    /// a thousand runs cost one commit, and a failure queues none.
    public func createAll(_ workflow: Workflow, inputs: [JSONValue], status: RunStatus = .queued,
                          labels: [String: String] = [:], priority: Int = 0, maxRate: RateTimetable? = nil,
                          queue: String = "default") throws -> [RunRecord]
    {
        let records = try inputs.map {
            try Self.record(workflow, inputs: $0, status: status, id: nil, labels: labels, priority: priority, maxRate: maxRate,
                        queue: queue)
        }
        try store.createRuns(records.map { (run: $0.0, events: $0.1) })
        return records.map(\.0)
    }

    /// A new run's record and its `run.added` event. Throws `RunID.Invalid` for an id that
    /// breaks the run id rule (every entry checks it before; this is the last line).
    static func record(_ workflow: Workflow, inputs: JSONValue, status: RunStatus, id: String?, labels: [String: String],
                       priority: Int, maxRate: RateTimetable?, queue: String) throws(RunID.Invalid) -> (RunRecord, [EventRecord])
    {
        let runID = id ?? RunIDs.make()
        try RunID.check(runID)
        // The directory itself is made by the node that executes the run (RunExecutor).
        let now = Date().timeIntervalSince1970
        var run = RunRecord(id: runID, workflowName: workflow.name, workflowFile: workflow.file,
                            workflowSource: workflow.source, inputs: inputs, status: status, createdAt: now,
                            runDir: RunRecord.runDirectory(for: runID), priority: priority, labels: labels)
        run.rateCap = maxRate
        run.queue = queue
        run.retention = workflow.retention
        let added = EventRecord(runID: runID, time: now, type: .runAdded,
                                data: ["workflow": .string(workflow.name), "file": .string(workflow.file)])
        return (run, [added])
    }
}

/// Run ids: sortable by creation time, short enough to type, unique without coordination.
///
/// The time is to the second, so the random part must keep apart the runs of one second: a
/// `submit --batch` of 10,000 runs makes them all in a second or two, and with 6 letters of 32
/// two of them shared an id about one batch in twenty (the batch then failed whole). A process
/// never repeats an id within a second; between processes, eight letters make 10,000 ids of
/// one second collide about once in 20,000 such seconds.
public enum RunIDs {
    private static let alphabet = Array("abcdefghijkmnpqrstuvwxyz23456789")
    /// The ids this process made in the second it made its last one (guarded by `lock`).
    nonisolated(unsafe) private static var madeThisSecond: (stamp: String, ids: Set<String>) = ("", [])
    private static let lock = NSLock()

    public static func make(now: Date = Date()) -> String {
        var time = time_t(now.timeIntervalSince1970)
        var parts = tm()
        gmtime_r(&time, &parts)
        let stamp = String(format: "%04d%02d%02d-%02d%02d%02d", parts.tm_year + 1900, parts.tm_mon + 1, parts.tm_mday,
                           parts.tm_hour, parts.tm_min, parts.tm_sec)
        return lock.withLock {
            if madeThisSecond.stamp != stamp { madeThisSecond = (stamp, []) }
            while true {
                let id = "\(stamp)-\(String((0..<8).map { _ in alphabet.randomElement()! }))"
                if madeThisSecond.ids.insert(id).inserted { return id }
            }
        }
    }
}

/// Resolves a workflow's secrets from the environment or their files. Done again at every
/// attempt, so a rotated token is picked up; the values are never written anywhere.
public enum SecretResolver {
    public struct Resolution: Sendable {
        public var values: [String: String]
        public var missing: [SecretDeclaration]
        /// Why each missing secret has no value, by name.
        public var reasons: [String: String] = [:]

        /// "remotes.yaml:4:20: secret 'x' needs the environment variable X, which is not set", one per missing secret.
        public var messages: [String] {
            missing.map { "\($0.location): \(reasons[$0.name] ?? "\($0.displayName) has no value")" }
        }
    }

    public static func resolve(_ declarations: [SecretDeclaration], environment: [String: String]) -> Resolution {
        var resolution = Resolution(values: [:], missing: [])
        for declaration in declarations {
            switch declaration.source {
            case .environment(let variable):
                if let value = environment[variable], !value.isEmpty {
                    resolution.values[declaration.name] = value
                } else {
                    resolution.missing.append(declaration)
                    resolution.reasons[declaration.name] =
                        "\(declaration.displayName) needs the environment variable \(variable), which is not set"
                }
            case .file(let path):
                switch SecretFile.read(path, environment: environment) {
                case .success(let value):
                    resolution.values[declaration.name] = value
                case .failure(let why):
                    resolution.missing.append(declaration)
                    resolution.reasons[declaration.name] = "\(declaration.displayName) is read from \(path), which \(why.description)"
                }
            }
        }
        return resolution
    }
}
