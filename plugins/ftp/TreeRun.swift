import OrchestrateJSON
import OrchestratePluginKit

/// The files of a transfer (one, or a tree's, sorted by relative path), moved one after the
/// other over the step's one connection, with the step checkpoint
/// `{"order": f, "done": k, "current": {"mtime": t}}`: the first k files are in place (a resume
/// skips them) and file k was started when its source had modification time t. `f` fingerprints
/// the list (paths and sizes): a tree that changed since is started over. The file in progress
/// resumes from its partial (the server's `NAME.partial` for an upload, the local one for a
/// download) unless its source's time changed.
struct TreeRun {
    struct Entry {
        /// Relative path components below the transfer's source ([] for a file alone).
        var relative: [String]
        var size: Int64
    }

    let step: StepContext
    let entries: [Entry]

    /// What `move` is told about file `index`.
    struct Start {
        /// The modification time the checkpoint recorded when this file was started (nil: none).
        var savedMTime: Int64?
        /// Records the source's modification time as this file's, before its first byte moves.
        var recordMTime: (Int64) -> Void
    }

    /// Moves every entry not yet done with `move(entry, start)`, which returns the bytes it
    /// found already in place (resumed). Returns the bytes and resumed bytes of the run.
    func run(_ move: (Entry, Start, @escaping (Int64) -> Void) throws(StepError) -> Int64) throws(StepError) -> (bytes: Int64, resumed: Int64) {
        let fingerprint = TreeRun.fingerprint(entries)
        var saved = step.loadCheckpointJSON()
        if let checkpoint = saved, checkpoint["order"]?.stringValue != fingerprint {
            step.log(.info, "the files changed since the checkpoint: starting over")
            saved = nil
        }
        let done = min(Int(saved?["done"]?.intValue ?? 0), entries.count)
        if done > 0 { step.log(.info, "\(done) of \(entries.count) files already transferred") }
        let total = entries.reduce(0) { $0 + $1.size }
        var doneBytes = entries.prefix(done).reduce(0) { $0 + $1.size }
        var resumed = doneBytes
        for index in done ..< entries.count {
            try step.checkCancellation()
            let savedMTime = index == done ? saved?["current"]?["mtime"]?.intValue : nil
            let start = Start(savedMTime: savedMTime) { mtime in
                _ = step.saveCheckpoint(json: ["order": .string(fingerprint), "done": .int(Int64(index)),
                                               "current": ["mtime": .int(mtime)]])
            }
            let base = doneBytes
            resumed += try move(entries[index], start) { moved in
                step.progress(bytesDone: base + moved, bytesTotal: total, filesDone: Int64(index), filesTotal: Int64(entries.count))
            }
            doneBytes += entries[index].size
            _ = step.saveCheckpoint(json: ["order": .string(fingerprint), "done": .int(Int64(index + 1))])
        }
        step.progress(bytesDone: total, bytesTotal: total, filesDone: Int64(entries.count), filesTotal: Int64(entries.count))
        return (total, resumed)
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
