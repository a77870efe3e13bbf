import OrchestrateCurl
import OrchestrateJSON
import OrchestratePluginKit

/// The files of a transfer (one, or a tree's, sorted by relative path), moved by up to
/// `concurrency` workers at once, each over its own FTP control connection (FTP moves one file
/// at a time per connection). Workers take the files in order.
///
/// The step checkpoint is `{"order": f, "done": k, "also": [[a, b]…], "started": {"i": t…}}`:
/// the first k files and those in the ranges a…b are in place (a resume skips them), and file i
/// was started when its source had modification time t. `f` fingerprints the list (paths and
/// sizes): a tree that changed since is started over. A file in progress resumes from its
/// partial (the server's `NAME.partial` for an upload, the local one for a download) unless its
/// source's time changed. The one-at-a-time form `{"done": k, "current": {"mtime": t}}` reads
/// as file k started at t.
struct TreeRun {
    struct Entry {
        /// Relative path components below the transfer's source ([] for a file alone).
        var relative: [String]
        var size: Int64
    }

    let step: StepContext
    let entries: [Entry]

    /// What `move` is told about the file it moves.
    struct Start {
        /// The modification time the checkpoint recorded when this file was started (nil: none).
        var savedMTime: Int64?
        /// Records the source's modification time as this file's, before its first byte moves.
        var recordMTime: (Int64) -> Void
    }

    typealias Move = (FTPClient, Entry, Start, @escaping (Int64) -> Void) throws(StepError) -> Int64

    /// Moves every entry not yet done with `move(client, entry, start, progress)`, which returns
    /// the bytes it found already in place (resumed); `clients[w]` is worker w's connection (the
    /// workers are as many as the clients, fewer when fewer files are left). The first failure
    /// stops the other workers' transfers (`FTPClient.stop`) and is thrown. Returns the bytes
    /// and resumed bytes of the run.
    func run(_ clients: [FTPClient], _ move: @escaping Move) throws(StepError) -> (bytes: Int64, resumed: Int64) {
        let fingerprint = TreeRun.fingerprint(entries)
        var saved = step.loadCheckpointJSON()
        if let checkpoint = saved, checkpoint["order"]?.stringValue != fingerprint {
            step.log(.info, "the files changed since the checkpoint: starting over")
            saved = nil
        }
        let state = TreeState(step: step, entries: entries, saved: saved, fingerprint: fingerprint)
        let alreadyDone = state.doneCount
        if alreadyDone > 0 { step.log(.info, "\(alreadyDone) of \(entries.count) files already transferred") }
        let workers = Array(clients.prefix(max(1, min(clients.count, entries.count - alreadyDone))))
        let body: (FTPClient) -> Void = { [step, entries] client in
            client.stop = { state.failed }
            while !state.failed, let index = state.next() {
                if step.isCancelled { state.fail(.cancelled("the FTP transfer was cancelled")); return }
                let start = Start(savedMTime: state.savedMTime(index)) { mtime in state.started(index, mtime: mtime) }
                do throws(StepError) {
                    let resumed = try move(client, entries[index], start) { moved in state.moving(index, moved) }
                    state.finished(index, resumed: resumed)
                } catch {
                    state.fail(error)
                }
            }
        }
        let threads = workers.dropFirst().map { client in Worker { body(client) } }
        body(workers[0])
        for thread in threads { thread.join() }
        if let error = state.error { throw error }
        state.report()
        return (state.totalBytes, state.resumed)
    }

    /// FNV-1a (64 bits) of every path and size in order.
    static func fingerprint(_ entries: [Entry]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for entry in entries {
            for byte in entry.relative.joined(separator: "/").utf8 + [0] + String(entry.size).utf8 + [10] {
                hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3
            }
        }
        return String(hash, radix: 16)
    }
}

/// Which files of a run are done or started, shared by the workers; every change is saved as
/// the step's checkpoint under the lock, so a later save never carries an older state.
private final class TreeState: @unchecked Sendable {
    private let lock = Lock()
    private let step: StepContext
    private let sizes: [Int64]
    private let fingerprint: String
    private let saved: [Int: Int64]
    private var done: [Bool]
    /// Every file before `prefix` is done.
    private var prefix = 0
    /// The next file a worker may take.
    private var cursor = 0
    private var doneFiles: Int64 = 0
    private var doneBytes: Int64 = 0
    private var inFlight: [Int: Int64] = [:]
    private var startedAt: [Int: Int64] = [:]
    private var _resumed: Int64 = 0
    private var _error: StepError?
    private var ticker = ProgressTicker()
    let totalBytes: Int64

    init(step: StepContext, entries: [TreeRun.Entry], saved checkpoint: JSONValue?, fingerprint: String) {
        self.step = step
        self.fingerprint = fingerprint
        sizes = entries.map(\.size)
        totalBytes = sizes.reduce(0, +)
        done = Array(repeating: false, count: entries.count)
        let k = min(Int(checkpoint?["done"]?.intValue ?? 0), entries.count)
        for i in 0 ..< k { done[i] = true }
        for range in checkpoint?["also"]?.arrayValue ?? [] {
            guard let a = range[0]?.intValue, let b = range[1]?.intValue else { continue }
            let first = max(0, Int(a)), last = min(Int(b), entries.count - 1)
            if first <= last { for i in first ... last { done[i] = true } }
        }
        var times: [Int: Int64] = [:]
        if let mtime = checkpoint?["current"]?["mtime"]?.intValue { times[k] = mtime }
        for (key, value) in checkpoint?["started"]?.objectValue ?? [:] {
            if let index = Int(key), let mtime = value.intValue { times[index] = mtime }
        }
        saved = times
        for i in done.indices where done[i] {
            doneBytes += sizes[i]
            doneFiles += 1
        }
        _resumed = doneBytes
        advancePrefix()
    }

    var doneCount: Int { lock.withLock { Int(doneFiles) } }
    var error: StepError? { lock.withLock { _error } }
    var failed: Bool { lock.withLock { _error != nil } }
    var resumed: Int64 { lock.withLock { _resumed } }

    /// The next file not yet done nor taken, in order; nil when none is left.
    func next() -> Int? {
        lock.withLock {
            while cursor < done.count && done[cursor] { cursor += 1 }
            guard cursor < done.count else { return nil }
            defer { cursor += 1 }
            return cursor
        }
    }
    func savedMTime(_ index: Int) -> Int64? { saved[index] }

    /// The first failure wins; the others (transfers it stopped) are not reported.
    func fail(_ error: StepError) { lock.withLock { if _error == nil { _error = error } } }

    func started(_ index: Int, mtime: Int64) {
        lock.withLock {
            startedAt[index] = mtime
            _ = step.saveCheckpoint(json: checkpointLocked())
        }
    }

    func moving(_ index: Int, _ bytes: Int64) {
        lock.withLock {
            inFlight[index] = bytes
            reportLocked(force: false)
        }
    }

    func finished(_ index: Int, resumed: Int64) {
        lock.withLock {
            done[index] = true
            doneFiles += 1
            doneBytes += sizes[index]
            inFlight[index] = nil
            startedAt[index] = nil
            _resumed += resumed
            advancePrefix()
            _ = step.saveCheckpoint(json: checkpointLocked())
            reportLocked(force: false)
        }
    }

    func report() { lock.withLock { reportLocked(force: true) } }

    private func reportLocked(force: Bool) {
        guard ticker.due() || force else { return }
        step.progress(bytesDone: doneBytes + inFlight.values.reduce(0, +), bytesTotal: totalBytes, filesDone: doneFiles,
                      filesTotal: Int64(done.count))
    }

    private func checkpointLocked() -> JSONValue {
        var object: [String: JSONValue] = ["order": .string(fingerprint), "done": .int(Int64(prefix))]
        // Done files after the prefix, as ranges: workers take files in order, so the gaps are
        // the files in flight and the ranges at most as many as the workers.
        var ranges: [JSONValue] = []
        var i = prefix
        while i < done.count {
            guard done[i] else { i += 1; continue }
            let first = i
            while i + 1 < done.count && done[i + 1] { i += 1 }
            ranges.append([.int(Int64(first)), .int(Int64(i))])
            i += 1
        }
        if !ranges.isEmpty { object["also"] = .array(ranges) }
        if !startedAt.isEmpty {
            object["started"] = .object(Dictionary(uniqueKeysWithValues: startedAt.map { (String($0.key), JSONValue.int($0.value)) }))
        }
        return .object(object)
    }

    private func advancePrefix() {
        while prefix < done.count && done[prefix] { prefix += 1 }
    }
}
