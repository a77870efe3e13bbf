import OrchestrateExactPath
// What the store journals about watch folders (`on.watch`): which file was handed over as
// which work, so a file becomes work exactly once across restarts and serve processes.

/// One version of a file in a watched folder: the key of a hand-off. A file replaced later
/// with new content (another size or mtime) is a new version and is handed over again; the
/// same file seen again (after a restart, or by another serve process) is not, unless `after:`
/// removed it and its run was pruned since (`WatchHandOff.Outcome.removed`).
public struct WatchedFile: Sendable, Hashable {
    /// The watch's identity (`WatchIdentity` in the engine: node, workflow name and folder).
    public var watch: String
    /// Relative to the watched folder.
    public var path: String
    public var size: Int64
    /// Modification time in nanoseconds since 1970.
    public var mtimeNanoseconds: Int64

    public init(watch: String, path: String, size: Int64, mtimeNanoseconds: Int64) {
        self.watch = watch
        self.path = path
        self.size = size
        self.mtimeNanoseconds = mtimeNanoseconds
    }

    /// Paths compare byte for byte, as the folder's filesystem and the store compare them: two
    /// names that differ only in Unicode normalization are two files.
    public static func == (a: WatchedFile, b: WatchedFile) -> Bool {
        a.size == b.size && a.mtimeNanoseconds == b.mtimeNanoseconds && a.watch == b.watch && ExactPath(a.path) == ExactPath(b.path)
    }

    public func hash(into hasher: inout Hasher) {
        hasher.combine(watch)
        hasher.combine(ExactPath(path))
        hasher.combine(size)
        hasher.combine(mtimeNanoseconds)
    }
}

/// The work a file became: a new run, or an item of a running persistent session.
public enum WatchWork: Sendable {
    /// A new run (with its first events), created in the hand-off's transaction.
    case run(RunRecord, events: [EventRecord])
    /// An item `{source, destination}` of a long-lived step, added in the hand-off's
    /// transaction as `StateStore.addItem` adds one (with its `item.added` event).
    case item(runID: String, stepID: String, id: String, json: String, event: EventRecord?)

    public var runID: String {
        switch self {
        case .run(let run, _): run.id
        case .item(let runID, _, _, _, _): runID
        }
    }
}

/// A journaled hand-off.
public struct WatchHandOff: Sendable {
    /// Where the hand-off is in its life.
    public enum Outcome: String, Sendable, CaseIterable {
        /// Its work has not finished yet (or its `after:` action is not done yet).
        case pending
        /// Its work succeeded and the `after:` action was applied, or found nothing to do (the
        /// file changed or was gone, or a folder on its way was a link): the file may still be there.
        case done
        /// Its work failed or was cancelled: the file was left where it was.
        case left
        /// Its work succeeded and the `after:` action deleted the file or moved it out of the
        /// folder. Such a hand-off goes with its run (`pruneRuns`, `deleteRun`), so the same bytes
        /// dropped in again with the same mtime after that are new work; met again before, it
        /// becomes `done` (`handOver`) and stays.
        case removed
    }

    public var file: WatchedFile
    public var runID: String
    /// For an item of a persistent session: its step and item id.
    public var stepID: String?
    public var itemID: String?
    /// By the store's clock.
    public var handedAt: Double
    public var outcome: Outcome

    public init(file: WatchedFile, runID: String, stepID: String? = nil, itemID: String? = nil, handedAt: Double,
                outcome: Outcome = .pending)
    {
        self.file = file
        self.runID = runID
        self.stepID = stepID
        self.itemID = itemID
        self.handedAt = handedAt
        self.outcome = outcome
    }
}

/// A pending hand-off whose work ended (`WatchStore.endedHandOffs`), with how it ended.
public struct EndedHandOff: Sendable {
    public var handOff: WatchHandOff
    /// The run's status; nil when the run was deleted.
    public var runStatus: RunStatus?
    /// For an item of a session: its status; nil when it is not an item or the item is gone.
    public var itemStatus: ItemRecord.Status?

    public init(handOff: WatchHandOff, runStatus: RunStatus?, itemStatus: ItemRecord.Status?) {
        self.handOff = handOff
        self.runStatus = runStatus
        self.itemStatus = itemStatus
    }
}
