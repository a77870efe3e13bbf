import Foundation
import OrchestrateJSON

/// How long finished runs are kept, as the store holds it (`orchestrate queue retention`):
/// store-wide, and per named queue. A workflow's own `retention:` (journaled with each of its
/// runs) wins over both; a queue's over the store-wide period.
public struct RetentionSettings: Sendable, Equatable {
    /// 30 days: a month of history answers "what happened to last week's delivery" and a
    /// month's accounting, while a busy store (10,000 runs a day) stays in the low gigabytes.
    public static let defaultPeriod: Double = 30 * 86_400
    /// "off": kept until pruned by hand.
    public static let forever = Double.infinity

    /// Seconds, `forever`, or nil for `defaultPeriod`.
    public var storeWide: Double?
    /// Queue name to seconds (or `forever`).
    public var queues: [String: Double]

    public init(storeWide: Double? = nil, queues: [String: Double] = [:]) {
        self.storeWide = storeWide
        self.queues = queues
    }

    public var period: Double { storeWide ?? Self.defaultPeriod }
    public func period(queue: String) -> Double { queues[queue] ?? period }

    /// `queue_state` keys and values: `retention` (store-wide), `retention:QUEUE`; seconds or `off`.
    static let storeWideKey = "retention"
    static let queueKeyPrefix = "retention:"
    static func key(queue: String?) -> String { queue.map { queueKeyPrefix + $0 } ?? storeWideKey }
    static func text(_ seconds: Double) -> String { seconds.isInfinite ? "off" : String(seconds) }
    static func seconds(_ text: String) -> Double? { text == "off" ? forever : Double(text) }

    /// Reads the settings from `queue_state` rows.
    static func from(_ rows: [(key: String, value: String)]) -> RetentionSettings {
        var settings = RetentionSettings()
        for (key, value) in rows {
            guard let seconds = seconds(value) else { continue }
            if key == storeWideKey {
                settings.storeWide = seconds
            } else if key.hasPrefix(queueKeyPrefix) {
                settings.queues[String(key.dropFirst(queueKeyPrefix.count))] = seconds
            }
        }
        return settings
    }
}

/// Which finished runs `StateStore.prunableRuns` selects.
public struct PruneRule: Sendable {
    /// By hand (`prune --older-than`): every finished run that ended longer ago than this many
    /// seconds, whatever its retention. Nil: each run's own retention (workflow, queue, store).
    public var olderThan: Double?
    public var settings: RetentionSettings
    /// A subset of the finished statuses (`prune --status`); never anything unfinished.
    public var statuses: Set<RunStatus>

    public static let finishedStatuses: Set<RunStatus> = [.succeeded, .failed, .cancelled]

    public init(olderThan: Double? = nil, settings: RetentionSettings = RetentionSettings(),
                statuses: Set<RunStatus> = PruneRule.finishedStatuses)
    {
        self.olderThan = olderThan
        self.settings = settings
        self.statuses = statuses.intersection(Self.finishedStatuses)
    }

    /// The statuses, sorted, as SQL string literals (they are fixed words, never user text).
    var statusList: String { statuses.map(\.rawValue).sorted().map { "'\($0)'" }.joined(separator: ", ") }

    /// A period the databases can compare: `forever` as about 31 million years.
    static func finite(_ seconds: Double) -> Double { seconds.isInfinite ? 1e15 : seconds }

    /// The per-queue periods as a JSON object (bound as one parameter).
    var queuePeriodsJSON: String {
        JSONValue.object(settings.queues.mapValues { .double(Self.finite($0)) }).jsonText
    }
}

/// A finished run `prunableRuns` selected or `pruneRuns` removed.
public struct PrunableRun: Sendable, Equatable {
    public var id: String
    public var status: RunStatus
    public var queue: String
    /// When it finished (its creation, for a run cancelled before it started).
    public var finishedAt: Double
    /// As `RunRecord.runDir`.
    public var runDir: String

    public init(id: String, status: RunStatus, queue: String, finishedAt: Double, runDir: String) {
        self.id = id
        self.status = status
        self.queue = queue
        self.finishedAt = finishedAt
        self.runDir = runDir
    }

    public func localRunDirectory(stateDirectory: String) -> String {
        runDir.hasPrefix("/") ? runDir : stateDirectory + "/" + runDir
    }
}
