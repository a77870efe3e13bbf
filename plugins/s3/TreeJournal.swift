import OrchestrateJSON
import OrchestratePluginKit

/// Which files of a tree transfer are done, journaled in the step's checkpoint so a resume
/// skips them:
///
///     {"v": 1, "tree": f, "done": k, "also": [i…], "file": {…}, "file_at": j, "partial": p}
///
/// The first k files of the processing order and those listed in `also` are done (files finish
/// out of order only while `concurrency` of them are in flight, so `also` stays short and the
/// checkpoint small: saving it per file costs the same for the 10th file as for the 100,000th).
/// `file` is the state of file j, a big one moved in parts or ranges (a multipart upload's
/// parts, a download's ranges), and `partial` its local partial file (where the engine looks
/// for it). `f` fingerprints the order (paths and sizes): a tree that changed since is started
/// over. One thread at a time changes it: the step's, which runs the CurlPool; or, for a
/// download's small files, the thread that commits them (BatchCommit, under a lock the step's
/// thread takes to read the counts); or, for the big download in progress, its fsync thread
/// saving `file` (RangeSync).
final class TreeJournal {
    private let step: StepContext
    private let fingerprint: String
    private var done: [Bool]
    private var prefix = 0
    private var beyond: Set<Int> = []
    private var file: JSONValue?
    private var fileAt: Int?
    private(set) var doneCount = 0

    init(step: StepContext, fingerprint: String, count: Int) {
        self.step = step
        self.fingerprint = fingerprint
        done = Array(repeating: false, count: count)
        var saved = step.loadCheckpointJSON()
        if let checkpoint = saved, checkpoint["v"]?.intValue != 1 || checkpoint["tree"]?.stringValue != fingerprint {
            if checkpoint["tree"] != nil { step.log(.info, "the files changed since the checkpoint: starting the tree over") }
            saved = nil
        }
        guard let saved else { return }
        let k = max(0, min(Int(saved["done"]?.intValue ?? 0), count))
        for i in 0 ..< k { done[i] = true }
        for i in saved["also"]?.arrayValue?.compactMap(\.intValue) ?? [] where i >= 0 && Int(i) < count { done[Int(i)] = true }
        doneCount = done.filter { $0 }.count
        if let at = saved["file_at"]?.intValue, at >= 0, Int(at) < count, !done[Int(at)] {
            file = saved["file"]
            fileAt = Int(at)
        }
        advance()
    }

    func isDone(_ index: Int) -> Bool { done[index] }

    /// Marks file `index` done and saves the checkpoint.
    func finished(_ index: Int) { finished([index]) }

    /// Marks the files `indices` done and saves the checkpoint once.
    func finished(_ indices: [Int]) {
        guard !indices.isEmpty else { return }
        for index in indices {
            if !done[index] {
                done[index] = true
                doneCount += 1
                beyond.insert(index)
            }
            if fileAt == index {
                file = nil
                fileAt = nil
            }
        }
        advance()
        save()
    }

    /// The checkpoint entry of file `index`, moved in parts or ranges.
    func slot(at index: Int) -> CheckpointSlot {
        CheckpointSlot(load: { [self] in fileAt == index ? file : nil }, save: { [self] json in
            let empty = json.objectValue?.isEmpty ?? false
            file = empty ? nil : json
            fileAt = empty ? nil : index
            save()
        })
    }

    private func advance() {
        while prefix < done.count && done[prefix] {
            beyond.remove(prefix)
            prefix += 1
        }
    }

    private func save() {
        var object: [String: JSONValue] = ["v": 1, "tree": .string(fingerprint), "done": .int(Int64(prefix))]
        if !beyond.isEmpty { object["also"] = .array(beyond.sorted().map { .int(Int64($0)) }) }
        if let file, let fileAt {
            object["file"] = file
            object["file_at"] = .int(Int64(fileAt))
            if let partial = file["partial"] { object["partial"] = partial }
        }
        step.saveCheckpoint(json: .object(object))
    }

    /// FNV-1a (64 bits) of `context` and every name and size in order.
    static func fingerprint(_ context: String, _ entries: [(name: String, size: Int64)]) -> String {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        func mix(_ bytes: some Sequence<UInt8>) { for byte in bytes { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01b3 } }
        mix(context.utf8)
        mix([10])
        for entry in entries {
            mix(entry.name.utf8)
            mix([0])
            mix(String(entry.size).utf8)
            mix([10])
        }
        return String(hash, radix: 16)
    }
}
