import OrchestrateJSON
import OrchestratePluginKit

/// A file or a directory tree. Files below the range threshold go `parallel` at a time, spread
/// over up to `connections` connections (the session's shared one and extra ones from its pool):
/// their requests interleave on each, so a tree of small files is not one round trip after
/// another, and each connection has its own server process (OpenSSH's `sftp-server` serves one
/// request at a time: the fsync of one file holds up every other request on its connection, so
/// the fsyncs of several connections overlap, and their encryption runs on several cores). Then
/// the big files, one at a time, each split into ranges. A file alone (a single-file transfer)
/// goes the one-at-a-time way, with its own checkpoint.
///
/// The step checkpoint is `{"order": f, "done": k, "ranges": [[a, b]…], "file": <range state>,
/// "file_at": j}` over that processing order: the first k files and those from a to b (both
/// included) of each range are in place (a resume skips them), and file j is a ranged file in
/// progress. `f` fingerprints the order (paths and sizes, in order): if the tree or the inputs
/// changed since, the order may have too, and the checkpoint is ignored (files already there are
/// sent again). The checkpoint is rewritten as each file lands, so its size must not grow with
/// the files done: the files done beyond k go as ranges, at most one per file still in flight
/// (one slow file holding k back while the others finish thousands is a few ranges, not a list
/// of thousands rewritten at every file). Checkpoints that list them one by one (`"also": [i…]`)
/// are read too.
struct TreeTransfer {
    let step: StepContext
    let session: Session
    let options: TransferOptions
    /// Small files in flight at once, over all connections together.
    var parallel = 8
    /// Small files pending per extra connection: a tree of fewer does not log in again for them.
    static let filesPerConnection = 32

    struct Entry { var relative: String; var size: Int64 }

    typealias Move = (FileTransfer, Connection, Entry, JSONValue?) throws(StepError) -> FileTransfer.Result

    /// Moves every entry with `move(transfer, connection, entry, fileCheckpoint)`, which may be
    /// called from several threads at once for small files.
    func run(_ entries: [Entry], connection: Connection, _ move: @escaping Move) throws(StepError)
        -> (bytes: Int64, resumed: Int64, skipped: (files: Int64, bytes: Int64), last: FileTransfer.Result?)
    {
        // A file alone goes the one-at-a-time way too, where the checkpoint is its own.
        let oneAtATime = { (entry: Entry) in entries.count == 1 || (options.connections > 1 && entry.size >= options.parallelThreshold) }
        let order = entries.filter { !oneAtATime($0) } + entries.filter(oneAtATime)
        let smallCount = order.count - entries.filter(oneAtATime).count
        let fingerprint = TreeTransfer.fingerprint(order)
        var saved = step.loadCheckpointJSON()
        if let checkpoint = saved, checkpoint["order"]?.stringValue != fingerprint {
            step.log(.info, "the tree changed since the checkpoint: starting it over")
            saved = nil
        }
        let state = TreeState(order: order, saved: saved, fingerprint: fingerprint)
        let total = order.reduce(0) { $0 + $1.size }
        let alreadyDone = state.doneCount
        if alreadyDone > 0 { step.log(.info, "\(alreadyDone) of \(order.count) files already transferred") }

        // Small files, `parallel` at a time, spread over the connections (worker w on lane
        // w % lanes; lane 0 is the shared connection).
        let pending = (0 ..< smallCount).filter { !state.isDone($0) }
        let workers = min(parallel, pending.count)
        if workers > 0 {
            let cursor = Cursor(pending)
            let lanes = Lanes(shared: connection, count: min(options.connections, workers, max(1, pending.count / TreeTransfer.filesPerConnection)),
                              session: session, step: step)
            defer { lanes.giveBack() }
            let body: (Int) -> Void = { [step, session, options] worker in
                let connection = lanes.connection(worker % lanes.count)
                while state.error == nil, let index = cursor.next() {
                    if step.isCancelled { state.fail(StepError.cancelled("sftp transfer cancelled")); return }
                    let transfer = FileTransfer(session: session, step: step, options: options)
                    transfer.onProgress = { bytes in
                        let (done, files) = state.moving(index, bytes)
                        step.progress(bytesDone: done, bytesTotal: total, filesDone: files, filesTotal: Int64(order.count))
                    }
                    do {
                        let result = try move(transfer, connection, order[index], nil)
                        step.saveCheckpoint(json: state.finished(index, result))
                    } catch {
                        state.fail(error)
                    }
                }
            }
            let threads = (1 ..< workers).map { worker in Worker { body(worker) } }
            body(0)
            for thread in threads { thread.join() }
            if let error = state.error { throw error }
        }

        // Big files (and a file alone), one at a time, each in ranges over several connections
        // when big enough, each with its own checkpoint.
        for index in smallCount ..< order.count where !state.isDone(index) {
            try step.checkCancellation()
            let transfer = FileTransfer(session: session, step: step, options: options)
            transfer.onProgress = { bytes in
                let (done, files) = state.moving(index, bytes)
                step.progress(bytesDone: done, bytesTotal: total, filesDone: files, filesTotal: Int64(order.count))
            }
            transfer.onCheckpoint = { fileState in step.saveCheckpoint(json: state.checkpoint(file: fileState, at: index)) }
            let result = try move(transfer, connection, order[index], state.savedFileState(at: index))
            step.saveCheckpoint(json: state.finished(index, result))
        }
        let (done, files) = state.moving(nil, 0)
        step.progress(bytesDone: done, bytesTotal: total, filesDone: files, filesTotal: Int64(order.count))
        return (done, state.resumed, state.skipped, state.last)
    }
}

/// A tree as a transfer sees it: its files, and the directories that hold no file or directory
/// to transfer (relative paths; "" is the tree's root). Those are created as they are, like
/// `cp -r` and `sftp put -r` do; every other directory is created on the way to a file.
struct TreeListing {
    var files: [TreeTransfer.Entry] = []
    var emptyDirectories: [String] = []

    /// `base` joined with a relative path of the listing (`base` "": a path relative to the
    /// remote root, which is the root itself).
    static func path(_ base: String, _ relative: String) -> String {
        relative.isEmpty ? base : base.isEmpty ? relative : base + "/" + relative
    }
}

extension TreeTransfer {
    /// FNV-1a (64 bits) of every path and size in processing order.
    static func fingerprint(_ order: [Entry]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for entry in order {
            for byte in entry.relative.utf8 + [0] + String(entry.size).utf8 + [10] {
                hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
            }
        }
        return String(hash, radix: 16)
    }
}

/// Which files of a tree are done, shared by the threads moving them.
private final class TreeState: @unchecked Sendable {
    private let lock = Lock()
    private let sizes: [Int64]
    private var done: [Bool]
    private var doneFiles: Int64 = 0
    /// Every file before `prefix` is done; `beyond` holds the done ones after it.
    private var prefix = 0
    private var beyond: Set<Int> = []
    private var inFlight: [Int: Int64] = [:]
    private var doneBytes: Int64 = 0
    private var _resumed: Int64 = 0
    private var _skipped: (files: Int64, bytes: Int64) = (0, 0)
    private var _last: FileTransfer.Result?
    private var _error: StepError?
    private let savedFile: JSONValue?
    private let savedFileAt: Int
    private let fingerprint: String

    init(order: [TreeTransfer.Entry], saved: JSONValue?, fingerprint: String) {
        self.fingerprint = fingerprint
        sizes = order.map(\.size)
        done = Array(repeating: false, count: order.count)
        let k = min(Int(saved?["done"]?.intValue ?? 0), order.count)
        for i in 0 ..< k { done[i] = true }
        for i in saved?["also"]?.arrayValue?.compactMap(\.intValue) ?? [] where Int(i) >= 0 && Int(i) < order.count { done[Int(i)] = true }
        for range in saved?["ranges"]?.arrayValue ?? [] {
            guard let a = range[0]?.intValue, let b = range[1]?.intValue, a >= 0, a <= b, b < Int64(order.count) else { continue }
            for i in Int(a) ... Int(b) { done[i] = true }
        }
        savedFile = saved?["file"]
        savedFileAt = Int(saved?["file_at"]?.intValue ?? Int64(k))
        for i in done.indices where done[i] {
            doneBytes += sizes[i]
            doneFiles += 1
            if i >= k { beyond.insert(i) }
        }
        _resumed = doneBytes
        advancePrefix()
    }

    var doneCount: Int { lock.withLock { Int(doneFiles) } }
    var error: StepError? { lock.withLock { _error } }
    var resumed: Int64 { lock.withLock { _resumed } }
    var skipped: (files: Int64, bytes: Int64) { lock.withLock { _skipped } }
    var last: FileTransfer.Result? { lock.withLock { _last } }

    func isDone(_ index: Int) -> Bool { lock.withLock { done[index] } }
    func savedFileState(at index: Int) -> JSONValue? { index == savedFileAt ? savedFile : nil }

    func fail(_ error: Error) {
        lock.withLock { if _error == nil { _error = error as? StepError ?? .permanent("\(error)") } }
    }

    /// Records the progress of file `index` (nil: none); returns bytes and files done overall.
    func moving(_ index: Int?, _ bytes: Int64) -> (Int64, Int64) {
        lock.withLock {
            if let index { inFlight[index] = bytes }
            return (doneBytes + inFlight.values.reduce(0, +), doneFiles)
        }
    }

    /// Marks file `index` done; returns the checkpoint to save.
    func finished(_ index: Int, _ result: FileTransfer.Result) -> JSONValue {
        lock.withLock {
            if !done[index] {
                done[index] = true
                doneFiles += 1
                doneBytes += sizes[index]
                beyond.insert(index)
            }
            inFlight[index] = nil
            _resumed += result.resumedFrom
            if result.skipped { _skipped = (_skipped.files + 1, _skipped.bytes + result.size) }
            _last = result
            advancePrefix()
            return checkpointLocked(file: nil, at: nil)
        }
    }

    func checkpoint(file: JSONValue?, at index: Int) -> JSONValue { lock.withLock { checkpointLocked(file: file, at: index) } }

    private func checkpointLocked(file: JSONValue?, at index: Int?) -> JSONValue {
        var object: [String: JSONValue] = ["order": .string(fingerprint), "done": .int(Int64(prefix))]
        if !beyond.isEmpty { object["ranges"] = .array(TreeState.ranges(beyond.sorted()).map { .array([.int(Int64($0.lowerBound)), .int(Int64($0.upperBound))]) }) }
        if let file, let index {
            object["file"] = file
            object["file_at"] = .int(Int64(index))
            // A download's local partial, where the engine looks for it (`PartialFiles`).
            if let partial = file["partial"] { object["partial"] = partial }
        }
        return .object(object)
    }

    /// Sorted indices as runs of consecutive ones.
    static func ranges(_ sorted: [Int]) -> [ClosedRange<Int>] {
        var out: [ClosedRange<Int>] = []
        for i in sorted {
            if let last = out.last, last.upperBound + 1 == i { out[out.count - 1] = last.lowerBound ... i } else { out.append(i ... i) }
        }
        return out
    }

    private func advancePrefix() {
        while prefix < done.count && done[prefix] {
            beyond.remove(prefix)
            prefix += 1
        }
    }
}

/// The connections a tree's small files are spread over: the shared one, and extra ones from
/// the session's pool, each logged in by the first worker that needs it (the others start at
/// once). An extra connection that cannot be opened leaves its workers on the shared one.
private final class Lanes: @unchecked Sendable {
    let count: Int
    private let shared: Connection
    private let session: Session
    private let step: StepContext
    private let lock = Lock()
    /// Held by the worker opening a lane's connection, so the lane's others wait for that one.
    private let opening: [Lock]
    private var opened: [Connection?]
    private var borrowed: [Connection] = []

    init(shared: Connection, count: Int, session: Session, step: StepContext) {
        self.shared = shared
        self.count = max(count, 1)
        self.session = session
        self.step = step
        opening = (0 ..< max(count, 1)).map { _ in Lock() }
        opened = Array(repeating: nil, count: max(count, 1))
    }

    func connection(_ lane: Int) -> Connection {
        if lane == 0 { return shared }
        return opening[lane].withLock {
            if let connection = lock.withLock({ opened[lane] }) { return connection }
            let connection: Connection
            do throws(StepError) {
                connection = try session.borrow(step)
                lock.withLock { borrowed.append(connection) }
            } catch {
                step.log(.warn, "an extra connection for the tree's small files failed (\(error.message)): its files go over the shared one")
                connection = shared
            }
            lock.withLock { opened[lane] = connection }
            return connection
        }
    }

    /// Returns the extra connections to the session's pool (a broken one is closed).
    func giveBack() {
        for connection in lock.withLock({ borrowed }) { session.giveBack(connection) }
    }
}

/// Hands out indices to worker threads, each once.
private final class Cursor: @unchecked Sendable {
    private let lock = Lock()
    private let items: [Int]
    private var position = 0

    init(_ items: [Int]) { self.items = items }

    func next() -> Int? {
        lock.withLock {
            guard position < items.count else { return nil }
            defer { position += 1 }
            return items[position]
        }
    }
}
