import OrchestrateJSON

/// The progress of a session step (`sftp.accept-paths`) made of its items' progress: the bytes
/// of the files it finished and of those it is moving, and each moving file's size, bytes and
/// rate. Journaled as the step's `step.progress` (at most once a second), so that `status`,
/// the HTTP API and `/metrics` see a session's bytes, and `RunDocument` shows its items running.
///
/// Not thread-safe: `AttemptDelegate` holds its lock.
struct SessionItemsProgress {
    private struct Moving {
        var rate: AttemptRate
        var bytesDone: Int64 = 0
        var bytesTotal: Int64 = -1
        var moved: Int64 = 0
    }

    private var moving: [String: Moving] = [:]
    /// What the files finished (or given up) in this attempt had done and moved.
    private var finishedBytes: Int64 = 0
    private var finishedMoved: Int64 = 0
    private var filesDone: Int64 = 0
    /// When the attempt began (wall clock): its moved bytes are measured from then.
    let startedAt: Double
    /// Changed since it was last journaled.
    private(set) var changed = false
    /// Whether any item was handed out in this attempt (a step that has none reports nothing).
    private(set) var hasItems = false

    init(startedAt: Double) { self.startedAt = startedAt }

    mutating func started(_ id: String, resumed: Bool, now: Double, wallNow: Double) {
        moving[id] = Moving(rate: AttemptRate(resumed: resumed, now: now, wallNow: wallNow))
        hasItems = true
        changed = true
    }

    /// A report of item `id`; returns its rate (0 for an item not handed out in this attempt).
    mutating func report(_ id: String, bytesDone: Int64, bytesTotal: Int64, now: Double, wallNow: Double) -> Double {
        guard var item = moving[id] else { return 0 }
        item.bytesDone = max(bytesDone, 0)
        if bytesTotal >= 0 { item.bytesTotal = bytesTotal }
        item.moved = max(item.moved, item.rate.moved(bytesDone, now: now, wallNow: wallNow))
        moving[id] = item
        changed = true
        return item.rate.rate(moved: item.moved, now: now)
    }

    /// Item `id` finished (`ok`) or stopped for now: what it moved stays counted.
    mutating func ended(_ id: String, ok: Bool) {
        guard let item = moving.removeValue(forKey: id) else { return }
        finishedMoved += item.moved
        if ok {
            finishedBytes += item.bytesDone
            filesDone += 1
        }
        changed = true
    }

    var bytesDone: Int64 { moving.values.reduce(finishedBytes) { $0 + $1.bytesDone } }
    var bytesMoved: Int64 { moving.values.reduce(finishedMoved) { $0 + $1.moved } }

    /// The step's progress: its bytes, the files it finished, the sum of its moving files' rates.
    func snapshot(now: Double) -> ProgressSnapshot {
        ProgressSnapshot(bytesDone: bytesDone, bytesTotal: -1, filesDone: filesDone, filesTotal: -1,
                         rate: moving.values.reduce(0) { $0 + $1.rate.rate(moved: $1.moved, now: now) })
    }

    /// The `step.progress` data: the snapshot's, `bytes_moved`, `since`, and `items`, each
    /// moving file's `bytes_done`, `bytes_total` (-1 when unknown) and `rate`.
    mutating func journal(now: Double) -> JSONValue {
        changed = false
        var data = snapshot(now: now).json.objectValue ?? [:]
        data["bytes_moved"] = .int(bytesMoved)
        data["since"] = .double(startedAt)
        data["items"] = .object(moving.mapValues { item in
            ["bytes_done": .int(item.bytesDone), "bytes_total": .int(item.bytesTotal),
             "rate": .double(item.rate.rate(moved: item.moved, now: now).rounded())]
        })
        return .object(data)
    }
}
