import OrchestrateJSON
import OrchestratePluginKit

/// A file or a directory tree moved file by file in sorted order. The step checkpoint is
/// `{"done": k, "file": <FileTransfer range state>}`: the first k files are in place, so a
/// resume skips them and continues the (k+1)th from its partial.
struct TreeTransfer {
    let step: StepContext
    let session: Session
    let options: TransferOptions

    struct Entry { var relative: String; var size: Int64 }

    /// `move(transfer, connection, entry, fileCheckpoint)` moves one file.
    func run(_ entries: [Entry], connection: Connection,
             _ move: (FileTransfer, Connection, Entry, JSONValue?) throws(StepError) -> FileTransfer.Result) throws(StepError) -> (bytes: Int64, resumed: Int64, last: FileTransfer.Result?)
    {
        let saved = step.loadCheckpointJSON()
        let startAt = Int(saved?["done"]?.intValue ?? 0)
        let total = entries.reduce(0) { $0 + $1.size }
        var doneBytes = entries.prefix(startAt).reduce(0) { $0 + $1.size }
        var resumed = doneBytes
        var last: FileTransfer.Result?
        let directories = DirectorySet()
        if startAt > 0 { step.log(.info, "\(startAt) of \(entries.count) files already transferred") }
        for index in entries.indices where index >= startAt {
            try step.checkCancellation()
            let entry = entries[index]
            let transfer = FileTransfer(session: session, step: step, options: options)
            transfer.knownDirectories = directories
            let base = doneBytes
            let files = Int64(entries.count)
            transfer.onProgress = { [step] bytes in
                step.progress(bytesDone: base + bytes, bytesTotal: total, filesDone: Int64(index), filesTotal: files)
            }
            transfer.onCheckpoint = { [step] state in
                var object: [String: JSONValue] = ["done": .int(Int64(index))]
                if let state { object["file"] = state }
                step.saveCheckpoint(json: .object(object))
            }
            let fileState = index == startAt ? saved?["file"] : nil
            let result = try move(transfer, connection, entry, fileState)
            resumed += result.resumedFrom
            last = result
            doneBytes += entry.size
            step.saveCheckpoint(json: .object(["done": .int(Int64(index + 1))]))
            step.progress(bytesDone: doneBytes, bytesTotal: total, filesDone: Int64(index + 1), filesTotal: files)
        }
        return (doneBytes, resumed, last)
    }
}
