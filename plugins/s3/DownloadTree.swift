import OrchestrateExactPath
import OrchestrateJSON
import OrchestratePluginFiles
import OrchestratePluginKit
import OrchestrateS3Auth

/// `s3.download` of a prefix: every object under it (ListObjectsV2, paged) to destination +
/// the rest of its key, checked by KeyPaths (a key that could leave the folder is skipped with
/// the reason). Objects at or below `part_size` come first, `concurrency` GETs at a time, each
/// written through its `.NAME.part` and verified (the `x-amz-meta-sha256` of the answer, else
/// an MD5 ETag) before it is renamed into place (in batches: BatchCommit); then the big ones one after the other, in
/// ranges (ObjectDownload), their state in the tree's checkpoint (TreeJournal). A finished
/// file is journaled and not fetched again by a resume.
struct DownloadTree {
    let client: S3Client
    let inputs: DownloadStep.Inputs
    let prefix: String

    private var step: StepContext { client.step }

    struct Entry {
        var object: ObjectListing.Object
        var components: [String]
        var relative: String { components.joined(separator: "/") }
    }

    func run() throws(StepError) {
        let destination = inputs.destination
        if let existing = try FileInfo.of(destination), !existing.isDirectory {
            throw StepError.invalidInput("destination \(destination) is a file: a prefix is downloaded into a folder", code: "ENOTDIR")
        }
        try LocalPath.makeDirectories(destination)
        let (entries, skipped) = try list()
        let isBig = { (entry: Entry) in entry.object.size > inputs.partSize }
        let order = entries.filter { !isBig($0) } + entries.filter(isBig)
        let smallCount = order.count - entries.filter(isBig).count
        let journal = TreeJournal(step: step, fingerprint: TreeJournal.fingerprint("download \(client.bucket) \(prefix) \(inputs.partSize)",
                                                                                     order.map { ($0.object.key, $0.object.size) }), count: order.count)
        let resumedFiles = journal.doneCount
        if resumedFiles > 0 { step.log(.info, "\(resumedFiles) of \(order.count) files were downloaded before: not fetched again") }
        let total = order.reduce(Int64(0)) { $0 + $1.object.size }
        var doneBytes = order.indices.filter(journal.isDone).reduce(Int64(0)) { $0 + order[$1].object.size }
        func report(_ moving: Int64 = 0) {
            step.progress(bytesDone: doneBytes + moving, bytesTotal: total, filesDone: Int64(journal.doneCount), filesTotal: Int64(order.count))
        }
        report()
        let folders = LocalFolders(root: destination)

        // Small objects, `concurrency` at a time, each in one GET; committed in batches beside
        // the transfers and journaled by the committing thread (under `journalLock` until the
        // batches are drained: the step's thread reads the counts for its progress meanwhile).
        var pending = (0 ..< smallCount).filter { !journal.isDone($0) }.makeIterator()
        var inFlight: [Int: SmallObject] = [:]
        let journalLock = Lock()
        let commits = BatchCommit { committed in
            journalLock.withLock {
                journal.finished(committed)
                doneBytes += committed.reduce(Int64(0)) { $0 + order[$1].object.size }
            }
        }
        do {
            let concurrency = inputs.concurrency ?? DownloadStep.smallObjectConcurrency
            try client.pool.runAll(maxInFlight: concurrency, next: { () throws(StepError) -> Exchange? in
                guard let index = pending.next() else { return nil }
                let entry = order[index]
                let partial = try PartialFile(for: try folders.prepare(entry.components), naming: .hiddenPart, keeping: .nothing)
                let small = SmallObject(partial: partial)
                inFlight[index] = small
                let exchange = try client.exchange("GET", key: entry.object.key,
                                                   headers: [("If-Match", "\"\(entry.object.etag)\""), S3Client.checksumMode],
                                                   label: "GET \(client.uri(entry.object.key))", tag: index)
                // The answer's head says what the bytes are checked against.
                exchange.acceptBody = { head in
                    guard head.status == 200 else { return false }
                    small.expect(ObjectChecksum(head, etag: entry.object.etag))
                    return true
                }
                var at: Int64 = 0
                exchange.sink = { [unowned exchange] bytes in
                    guard at + Int64(bytes.count) <= entry.object.size else {
                        exchange.callbackError = .retryable("\(exchange.label): the server sent more than the listed \(entry.object.size) bytes",
                                                            code: "object_changed")
                        return false
                    }
                    do throws(StepError) { try partial.write(bytes, at: at) } catch {
                        exchange.callbackError = error
                        return false
                    }
                    small.digests.update(bytes)
                    at += Int64(bytes.count)
                    return true
                }
                return exchange
            }, done: { (exchange, response) throws(StepError) in
                guard let small = inFlight.removeValue(forKey: exchange.tag) else { return }
                let entry = order[exchange.tag]
                do throws(StepError) {
                    try verifySmall(entry, response: response, bytes: exchange.bytesMoved, small: small, label: exchange.label)
                } catch {
                    try? small.partial.discard()
                    throw error
                }
                commits.submit(exchange.tag, small.partial)
                journalLock.withLock { report() }
                try commits.check()
            })
            commits.drain()
            try commits.check()
            report()
        } catch {
            // The small objects still in flight or not committed start from nothing next time: no
            // partial left behind.
            for small in inFlight.values { try? small.partial.discard() }
            commits.abandon()
            throw error
        }

        // Big objects, one at a time, in ranges.
        for index in smallCount ..< order.count where !journal.isDone(index) {
            try step.checkCancellation()
            let entry = order[index]
            let local = try folders.prepare(entry.components)
            let base = doneBytes
            let concurrency = inputs.concurrency ?? DownloadStep.rangeConcurrency
            _ = try ObjectDownload.fetch(client, key: entry.object.key, destination: local, rangeSize: inputs.partSize,
                                         concurrency: concurrency, slot: journal.slot(at: index), onProgress: { moved, _ in
                step.progress(bytesDone: base + moved, bytesTotal: total, filesDone: Int64(journal.doneCount), filesTotal: Int64(order.count))
            })
            journal.finished(index)
            doneBytes += entry.object.size
            report()
        }
        step.log(.info, "downloaded \(order.count) files (\(total) bytes) from \(client.uri(prefix)) to \(destination)"
            + (resumedFiles > 0 ? ", \(resumedFiles) of them before the restart" : "") + (skipped > 0 ? "; \(skipped) keys skipped" : ""))
        var outputs = DownloadStep.Outputs()
        outputs.path = destination
        outputs.uri = client.uri(prefix)
        outputs.files = Int64(order.count)
        outputs.bytes = total
        outputs.filesResumed = Int64(resumedFiles)
        outputs.skipped = Int64(skipped)
        try step.setOutputs(outputs)
    }

    /// The objects under the prefix whose keys make safe local paths, sorted by key; the others
    /// are logged and counted.
    private func list() throws(StepError) -> (entries: [Entry], skipped: Int) {
        var entries: [Entry] = []
        var skipped = 0
        var bounds = ListingBounds(maxEntries: inputs.maxFiles)
        try ObjectListing.each(client, prefix: prefix, pageSize: inputs.pageSize) { objects throws(StepError) in
            try bounds.count(objects.count, in: client.uri(prefix))
            for object in objects {
                guard ExactPath(object.key).hasPrefix(ExactPath(prefix)) else {
                    step.log(.warn, "skipping \(client.uri(object.key)): the server listed it under \(prefix), which it is not")
                    skipped += 1
                    continue
                }
                switch KeyPaths.local(ExactPath(object.key).dropping(ExactPath(prefix))) {
                case .path(let components):
                    entries.append(Entry(object: object, components: components))
                case .folderMarker:
                    if object.size > 0 { step.log(.warn, "skipping \(client.uri(object.key)): a key ending in \"/\" with \(object.size) bytes") }
                case .refused(let why):
                    step.log(.warn, "skipping the key \(quoted(object.key)): \(why); it cannot be a path inside \(inputs.destination)")
                    skipped += 1
                }
            }
            try step.checkCancellation()
        }
        var byPath: [ExactPath: [String]] = [:]
        for entry in entries { byPath[ExactPath(entry.relative)] = entry.components }
        let clashes = KeyPaths.clashes(byPath)
        if !clashes.isEmpty {
            entries.removeAll { entry in
                guard let why = clashes[ExactPath(entry.relative)] else { return false }
                step.log(.warn, "skipping the key \(quoted(entry.object.key)): \(why)")
                skipped += 1
                return true
            }
        }
        entries.sort { PathBytes.precedes($0.object.key, $1.object.key) }
        return (entries, skipped)
    }

    /// A key in a message: control characters (a newline planted in a key) escaped.
    private func quoted(_ key: String) -> String { PathBytes.quoted(key) }

    /// A small object's answer checked (status, ETag, length, checksum), before its commit.
    private func verifySmall(_ entry: Entry, response: Exchange.Response, bytes: Int64, small: SmallObject, label: String) throws(StepError)
    {
        if response.status == 412 {
            throw .retryable("\(client.uri(entry.object.key)) changed since it was listed; the next attempt lists it again", code: "object_changed")
        }
        guard response.status == 200 else { throw client.error(response, label: label, key: entry.object.key) }
        if let answered = response.header("etag"), ETag.unquoted(answered) != entry.object.etag {
            throw .retryable("\(client.uri(entry.object.key)) changed since it was listed (ETag \(answered)); the next attempt lists it again",
                             code: "object_changed")
        }
        guard bytes == entry.object.size else {
            throw .retryable("\(label): got \(bytes) of \(entry.object.size) bytes", code: "short_body")
        }
        // An empty body calls no sink, so no head was seen: the final answer says what to check.
        if !small.sawHead { small.expect(ObjectChecksum(response, etag: entry.object.etag)) }
        try small.expected.check(small.digests.finish(), what: client.uri(entry.object.key))
    }
}

/// A small object in flight: its partial file, and the digests its answer's head asked for
/// (set before the first byte of the body).
private final class SmallObject {
    let partial: PartialFile
    private(set) var expected = ObjectChecksum.none
    private(set) var digests = Digests(md5: false, sha256: false)
    /// The answer's head came before a body (not with an empty one: libcurl then calls no sink).
    private(set) var sawHead = false

    init(partial: PartialFile) { self.partial = partial }

    func expect(_ checksum: ObjectChecksum) {
        expected = checksum
        digests = checksum.digests(sha256: false)
        sawHead = true
    }
}
