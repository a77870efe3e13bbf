import OrchestrateJSON
import OrchestratePluginFiles
import OrchestratePluginKit
import OrchestrateS3Auth

/// `s3.download`: one object to one file, in ranges fetched `concurrency` at a time with
/// `If-Match` on the ETag the HEAD gave, into `.NAME.part` beside the destination (the kit's
/// PartialFile), renamed into place once verified.
///
/// The checkpoint `{"v":1, "bucket", "key", "etag", "size", "range_size", "done": [i...]}`
/// lists the ranges on disk (fsynced before they are listed): a resume fetches the others. An
/// object that changed since (another ETag, 412 on If-Match) starts the download over.
/// Verification: the SHA-256 against the object's `x-amz-meta-sha256` (written by s3.upload),
/// else the MD5 against a single-part ETag.
struct DownloadStep: StepDefinition {
    static let id = "s3.download"
    static let version = "0.1.0"
    static let summary = "Download an S3 object: parallel ranged GETs (If-Match), resumable, verified, atomic rename."
    struct Inputs: StepInputs {
        var connection = ConnectionInputs()
        @Input(help: "the object's key", minLength: 1) var key: String
        @Input(help: "final path of the file", minLength: 1) var destination: String
        @Input(help: "bytes per ranged GET", minimum: 1 << 20) var partSize: Int64 = 8 << 20
        @Input(help: "ranges in flight at once", minimum: 1, maximum: 64) var concurrency = 4
    }
    static let inputSchema = Inputs.schemaText
    static let outputSchema = #"""
        {"type":"object","properties":{
          "path":{"type":"string"},"size":{"type":"integer"},"etag":{"type":"string"},"sha256":{"type":"string"},
          "verified":{"type":"string","description":"sha256 (the uploader's metadata), md5 (the ETag) or none"},
          "ranges_resumed":{"type":"integer","description":"ranges an earlier attempt had written, kept"}}}
        """#

    static func run(_ step: StepContext) throws {
        let inputs = try step.read(Inputs.self)
        let client = try S3Client(inputs.connection, step: step)
        try ObjectKey.check(inputs.key)
        let key = inputs.key, destination = inputs.destination
        if let existing = try FileInfo.of(destination), existing.isDirectory {
            throw StepError.invalidInput("destination \(destination) is a directory; give the file's path", code: "EISDIR")
        }
        try LocalPath.makeDirectories(LocalPath.parent(of: destination))

        let head = try client.head(key)
        guard let size = head.header("content-length").flatMap({ Int64($0) }), let etag = head.header("etag"), !etag.isEmpty else {
            throw StepError.retryable("HEAD \(client.uri(key)): no Content-Length or ETag in the answer", code: "s3_protocol")
        }
        let expectedSHA = head.header("x-amz-meta-sha256")?.lowercased()

        let saved = step.loadCheckpointJSON()
        let rangeSize = inputs.partSize
        var done = Set<Int>()
        var keep = false
        if let saved, saved["v"]?.intValue == 1, saved["bucket"]?.stringValue == client.bucket, saved["key"]?.stringValue == key,
           saved["etag"]?.stringValue == etag, saved["size"]?.intValue == size, saved["range_size"]?.intValue == rangeSize
        {
            done = Set((saved["done"]?.arrayValue ?? []).compactMap { $0.intValue.map(Int.init) })
            keep = true
        } else if saved != nil {
            step.log(.info, "the object changed since the last attempt (or the inputs did): starting over")
        }
        let partial = try PartialFile(for: destination, naming: .hiddenPart, keeping: keep ? .all : .nothing)
        // A partial file shorter than the ranges the checkpoint lists was replaced or cut: start over.
        if let last = done.max(), partial.size < min(size, Int64(last + 1) * rangeSize) {
            step.log(.warn, "\(partial.path) is shorter than the checkpoint says: starting over")
            try partial.startOver()
            done = []
        }
        let resumed = done.count
        let count = size == 0 ? 0 : Int((size + rangeSize - 1) / rangeSize)
        func save() {
            step.saveCheckpoint(json: ["v": 1, "bucket": .string(client.bucket), "key": .string(key), "etag": .string(etag),
                                       "size": .int(size), "range_size": .int(rangeSize), "done": .array(done.sorted().map { .int(Int64($0)) })])
        }
        save()
        if resumed > 0 { step.log(.info, "resuming \(client.uri(key)): \(resumed) of \(count) ranges already on disk") }

        var missing = (0 ..< count).filter { !done.contains($0) }.makeIterator()
        var doneBytes = done.reduce(Int64(0)) { $0 + min(rangeSize, size - Int64($1) * rangeSize) }
        step.progress(bytesDone: doneBytes, bytesTotal: size)
        do throws(StepError) {
            try client.pool.runAll(maxInFlight: inputs.concurrency, next: { () throws(StepError) -> Exchange? in
                guard let index = missing.next() else { return nil }
                let start = Int64(index) * rangeSize, end = min(size, start + rangeSize) - 1
                let exchange = try client.exchange("GET", key: key, headers: [("Range", "bytes=\(start)-\(end)"), ("If-Match", etag)],
                                                   label: "GET \(client.uri(key)) bytes \(start)-\(end)", tag: index)
                // Only the range asked for is written.
                exchange.acceptBody = { head in Self.isRange(head, start: start, end: end, size: size) }
                var at = start
                exchange.sink = { [unowned exchange] bytes in
                    guard at + Int64(bytes.count) <= end + 1 else {
                        exchange.callbackError = .retryable("\(exchange.label): the server sent more than the range", code: "bad_range")
                        return false
                    }
                    do throws(StepError) { try partial.write(bytes, at: at) } catch {
                        exchange.callbackError = error
                        return false
                    }
                    at += Int64(bytes.count)
                    return true
                }
                return exchange
            }, done: { (exchange, response) throws(StepError) in
                let index = exchange.tag
                let start = Int64(index) * rangeSize, length = min(rangeSize, size - start)
                if response.status == 412 {
                    throw .retryable("\(client.uri(key)) changed while it was downloaded (its ETag is no longer \(etag)); the next attempt starts over",
                                     code: "object_changed")
                }
                guard response.isSuccess else { throw client.error(response, label: exchange.label, key: key) }
                guard Self.isRange(response, start: start, end: start + length - 1, size: size) else {
                    throw .retryable("\(exchange.label): the server answered \(response.status) with Content-Range "
                        + "\(response.header("content-range") ?? "(none)"), not the range asked for", code: "bad_range")
                }
                // If-Match is not honoured everywhere (rclone serve s3 ignores it): the answer's ETag
                // is checked too.
                if let answered = response.header("etag"), ETag.unquoted(answered) != ETag.unquoted(etag) {
                    throw .retryable("\(client.uri(key)) changed while it was downloaded (ETag \(answered), not \(etag)); the next attempt starts over",
                                     code: "object_changed")
                }
                guard exchange.bytesMoved == length else {
                    throw .retryable("\(exchange.label): got \(exchange.bytesMoved) of \(length) bytes", code: "short_body")
                }
                // On disk before the checkpoint says so.
                try partial.sync()
                done.insert(index)
                save()
                doneBytes += length
                step.progress(bytesDone: doneBytes, bytesTotal: size)
            })
        } catch {
            if error.code == "object_changed" {
                try? partial.discard()
                step.saveCheckpoint(json: [:])
            }
            throw error
        }

        // Verified before it takes the destination's name.
        let (md5, sha256) = try Digests.of(partial.file, offset: 0, length: size, step: step)
        let sha = S3Crypto.hex(sha256)
        let plainETag = ETag.unquoted(etag)
        var verified = "none"
        if let expectedSHA {
            guard expectedSHA == sha else {
                try partial.discard()
                step.saveCheckpoint(json: [:])
                throw StepError.permanent("\(client.uri(key)): the SHA-256 of the bytes received is \(sha), the object's metadata says \(expectedSHA); "
                    + "the partial file was deleted", code: "sha256_mismatch")
            }
            verified = "sha256"
        } else if ETag.isMD5(plainETag) {
            guard plainETag.lowercased() == S3Crypto.hex(md5) else {
                try partial.discard()
                step.saveCheckpoint(json: [:])
                throw StepError.permanent("\(client.uri(key)): the MD5 of the bytes received is not the ETag \(plainETag); the partial file was deleted",
                                          code: "md5_mismatch")
            }
            verified = "md5"
        } else {
            step.log(.warn, "\(client.uri(key)) has no SHA-256 metadata and a multipart ETag: only the size is checked")
        }
        if partial.size != size { try partial.file.truncate(to: size) }
        try partial.commit()
        step.progress(bytesDone: size, bytesTotal: size)
        step.log(.info, "downloaded \(client.uri(key)) → \(destination) (\(size) bytes, verified: \(verified))")
        step.setOutput("path", .string(destination))
        step.setOutput("size", .int(size))
        step.setOutput("etag", .string(plainETag))
        step.setOutput("sha256", .string(sha))
        step.setOutput("verified", .string(verified))
        step.setOutput("ranges_resumed", .int(Int64(resumed)))
    }

    /// True when `response` carries bytes `start`-`end` of a `size`-byte object: a 206 with that
    /// Content-Range (rclone serve s3 answers 200 with it), or a 200 without one when the range
    /// is the whole object.
    static func isRange(_ response: Exchange.Response, start: Int64, end: Int64, size: Int64) -> Bool {
        guard response.status == 200 || response.status == 206 else { return false }
        if let range = response.header("content-range") { return range == "bytes \(start)-\(end)/\(size)" }
        return response.status == 200 && start == 0 && end == size - 1
    }
}
