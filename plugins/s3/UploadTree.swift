#if canImport(Glibc)
import Glibc
#endif
import OrchestrateJSON
import OrchestratePluginFiles
import OrchestratePluginKit

/// `s3.upload` of a folder: each regular file to prefix + its relative path. The files at or
/// below `multipart_threshold` go first, `concurrency` PUTs at a time on the step's CurlPool;
/// then the big ones one after the other, each a multipart upload with `concurrency` parts in
/// flight, its state in the tree's checkpoint (TreeJournal). A finished file is journaled and
/// not sent again by a resume.
struct UploadTree {
    let client: S3Client
    let inputs: UploadStep.Inputs
    let prefix: String

    private var step: StepContext { client.step }

    func run() throws(StepError) {
        let root = inputs.source.hasSuffix("/") && inputs.source.count > 1 ? String(inputs.source.dropLast()) : inputs.source
        let (files, skipped) = try LocalTree.walk(root, step: step)
        for file in files {
            guard (prefix + file.relative).utf8.count <= 1024 else {
                throw .invalidInput("\(root)/\(file.relative): the key \(prefix + file.relative) would be longer than 1024 bytes", code: "bad_key")
            }
        }
        let isBig = { (entry: LocalTree.Entry) in entry.size > inputs.multipartThreshold }
        let order = files.filter { !isBig($0) } + files.filter(isBig)
        let smallCount = order.count - files.filter(isBig).count
        let journal = TreeJournal(step: step, fingerprint: TreeJournal.fingerprint("upload \(client.bucket) \(prefix)",
                                                                                     order.map { ($0.relative, $0.size) }), count: order.count)
        let resumedFiles = journal.doneCount
        if resumedFiles > 0 { step.log(.info, "\(resumedFiles) of \(order.count) files were uploaded before: not sent again") }
        let total = order.reduce(Int64(0)) { $0 + $1.size }
        var doneBytes = order.indices.filter(journal.isDone).reduce(Int64(0)) { $0 + order[$1].size }
        func report(_ moving: Int64 = 0) {
            step.progress(bytesDone: doneBytes + moving, bytesTotal: total, filesDone: Int64(journal.doneCount), filesTotal: Int64(order.count))
        }
        report()

        // Small files, `concurrency` at a time.
        var pending = (0 ..< smallCount).filter { !journal.isDone($0) }.makeIterator()
        var puts: [Int: SinglePut] = [:]
        try client.pool.runAll(maxInFlight: inputs.concurrency, next: { () throws(StepError) -> Exchange? in
            guard let index = pending.next() else { return nil }
            let source = try open(root, order[index])
            let put = try SinglePut(client, key: prefix + order[index].relative, source: source, contentType: inputs.contentType, tag: index)
            puts[index] = put
            return put.exchange
        }, done: { (exchange, response) throws(StepError) in
            guard let put = puts.removeValue(forKey: exchange.tag) else { return }
            _ = try put.check(response)
            journal.finished(exchange.tag)
            doneBytes += order[exchange.tag].size
            report()
        })

        // Big files, one at a time, in parts.
        for index in smallCount ..< order.count where !journal.isDone(index) {
            try step.checkCancellation()
            let source = try open(root, order[index])
            var upload = MultipartUpload(client: client, key: prefix + order[index].relative, source: source, partSize: inputs.partSize,
                                         concurrency: inputs.concurrency, keepParts: inputs.keepParts, contentType: inputs.contentType,
                                         slot: journal.slot(at: index))
            upload.onProgress = { moved in report(moved) }
            _ = try upload.run()
            journal.finished(index)
            doneBytes += order[index].size
            report()
        }
        step.log(.info, "uploaded \(order.count) files (\(total) bytes) from \(root) to \(client.uri(prefix))"
            + (resumedFiles > 0 ? ", \(resumedFiles) of them before the restart" : "") + (skipped > 0 ? "; \(skipped) entries skipped" : ""))
        var outputs = UploadStep.Outputs()
        outputs.uri = client.uri(prefix)
        outputs.bucket = client.bucket
        outputs.prefix = prefix
        outputs.files = Int64(order.count)
        outputs.bytes = total
        outputs.filesResumed = Int64(resumedFiles)
        outputs.skipped = Int64(skipped)
        try step.setOutputs(outputs)
    }

    /// The file at `relative`, opened without following a symbolic link put there since the walk.
    private func open(_ root: String, _ entry: LocalTree.Entry) throws(StepError) -> SourceFile {
        let path = root + "/" + entry.relative
        // As every source: the folders on the way are walked, not trusted (a subfolder swapped
        // for another user's link after the listing is refused), and a FIFO does not hang.
        let file = try LocalFile(readingListed: path)
        guard let info = try FileInfo.of(path), info.isRegular else {
            throw .permanent("\(path) is no longer a regular file", code: "file_changed")
        }
        return SourceFile(file: file, size: file.size, mtime: info.mtimeNanoseconds)
    }
}
