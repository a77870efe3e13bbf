import OrchestrateJSON
import OrchestratePluginFiles
import OrchestratePluginKit
import OrchestrateS3Auth

/// One object to one file, in ranges fetched `concurrency` GETs at a time with `If-Match` on
/// the ETag the HEAD gave, into `.NAME.part` beside the destination (the kit's PartialFile),
/// renamed into place once verified. A range (`range_size`) is what the checkpoint counts; a GET
/// asks for up to `requestBytes` of consecutive ranges, and each range is handed to the fsync
/// thread as soon as its last byte is written, so bigger requests (fewer for the server to
/// answer) cost nothing more after a kill.
///
/// The checkpoint `{"v":1, "bucket", "key", "etag", "size", "range_size", "done": [i...],
/// "partial"}` lists the ranges on disk (fsynced before they are listed, on a thread of their
/// own: RangeSync): a resume fetches the others. When a CRC-64 is all the file is checked with
/// (the usual case), each chunk is hashed from memory as it is written, around the page cache
/// (RangeWriter); when an MD5 or a SHA-256 is wanted, the digests follow the written prefix on
/// another thread (PrefixHash), so the end only hashes the tail. An object that changed since
/// (another ETag, 412 on If-Match) starts the download over. Verification: ObjectChecksum (the
/// CRC-64/NVME s3.upload stores, or S3's own; else the SHA-256 it stored before; else a
/// single-part ETag's MD5).
enum ObjectDownload {
    /// Bytes one GET asks for at most. Each request costs the server an open and a read-ahead
    /// that starts small (`rclone serve s3`: 0.62 s of its CPU for a 1 GiB object in 128
    /// requests, 0.46 s in 32), and on a machine the client shares with it that CPU is time.
    static let requestBytes: Int64 = 32 << 20

    /// How many consecutive ranges one GET asks for: up to `requestBytes`, but never so many that
    /// fewer than two GETs per connection are left (a 40 MiB object still goes 4 streams wide,
    /// and the last GETs do not leave connections idle for long).
    static func rangesPerRequest(count: Int, rangeSize: Int64, concurrency: Int) -> Int {
        max(1, min(Int(max(1, requestBytes / rangeSize)), count / (2 * max(1, concurrency))))
    }

    struct Result {
        var size: Int64
        var etag: String
        var crc64: UInt64
        /// Computed when it verified the file or `sha256` asked for it.
        var sha256: String?
        /// crc64nvme, sha256, md5 or none.
        var verified: String
        var rangesResumed: Int
    }

    /// Fetches `key` to `destination` (whose folder exists), computing the file's SHA-256 also
    /// when `sha256` (else only when it is what verifies). `onProgress` is told the bytes on disk
    /// and the object's size.
    static func fetch(_ client: S3Client, key: String, destination: String, rangeSize: Int64, concurrency: Int, sha256: Bool = false,
                      slot: CheckpointSlot, onProgress: (_ done: Int64, _ total: Int64) -> Void) throws(StepError) -> Result
    {
        let step = client.step
        let head = try client.head(key)
        guard let size = head.header("content-length").flatMap({ Int64($0) }), let etag = head.header("etag"), !etag.isEmpty else {
            throw StepError.retryable("HEAD \(client.uri(key)): no Content-Length or ETag in the answer", code: "s3_protocol")
        }
        let expected = ObjectChecksum(head, etag: etag)

        let saved = slot.load()
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
            slot.save(["v": 1, "bucket": .string(client.bucket), "key": .string(key), "etag": .string(etag), "size": .int(size),
                       "range_size": .int(rangeSize), "done": .array(done.sorted().map { .int(Int64($0)) }),
                       "partial": .string(LocalPath.absolute(partial.path))])
        }
        save()
        if resumed > 0 { step.log(.info, "resuming \(client.uri(key)): \(resumed) of \(count) ranges already on disk") }

        let missing = (0 ..< count).filter { !done.contains($0) }
        let perRequest = rangesPerRequest(count: count, rangeSize: rangeSize, concurrency: concurrency)
        var cursor = 0
        /// The next run of consecutive missing ranges, at most `perRequest` long.
        func nextRequest() -> Range<Int>? {
            guard cursor < missing.count else { return nil }
            let first = missing[cursor]
            var end = first + 1
            cursor += 1
            while cursor < missing.count, missing[cursor] == end, end - first < perRequest {
                end += 1
                cursor += 1
            }
            return first ..< end
        }
        func rangeEnd(_ index: Int) -> Int64 { min(size, Int64(index + 1) * rangeSize) }
        func rangeLength(_ index: Int) -> Int64 { rangeEnd(index) - Int64(index) * rangeSize }
        var requested: [Int: Range<Int>] = [:]
        var doneBytes = done.reduce(Int64(0)) { $0 + rangeLength($1) }
        onProgress(doneBytes, size)
        // The ranges on disk (journaled or not): the hash follows their contiguous prefix, and
        // the fsyncs that let the checkpoint list them run beside the transfers.
        var written = done
        var prefix = 0
        let plainETag = ETag.unquoted(etag)
        // One of the two: the chunks hashed as they are written, or the file read back behind them.
        // A writer's buffers: one held by each GET, and a few on their way to the disk.
        let writer = expected.isCRCOnly(sha256: sha256)
            ? RangeWriter(partial: partial, rangeSize: rangeSize, size: size, buffers: concurrency + 4) : nil
        writer?.readBack(done.sorted())
        let hash = writer == nil ? PrefixHash(file: partial.file, digests: expected.digests(sha256: sha256), step: step) : nil
        defer {
            hash?.stop()
            writer?.stop()
        }
        // Journals on its own thread as each fsync returns; the owner touches `done` again only
        // after `drain`.
        let syncer = RangeSync(file: partial.file) { durable in
            done.formUnion(durable)
            save()
        }
        defer { syncer.drain() }
        func advance() {
            while written.contains(prefix) { prefix += 1 }
            hash?.advance(to: min(size, Int64(prefix) * rangeSize))
        }
        advance()
        do throws(StepError) {
            // The sinks run only inside runAll, which returns before fetch does.
            try withoutActuallyEscaping(onProgress) { (onProgress) throws(StepError) in
                /// Range `index` is all on disk: the fsync thread takes it from here.
                func landed(_ index: Int) throws(StepError) {
                    try syncer.check()
                    syncer.wrote(index)
                    written.insert(index)
                    advance()
                    doneBytes += rangeLength(index)
                    onProgress(doneBytes, size)
                }
                /// The ranges the writer's threads have finished since the last look.
                func landedByWriter() throws(StepError) {
                    guard let writer else { return }
                    try writer.check()
                    for index in writer.landed() { try landed(index) }
                }
                try client.pool.runAll(maxInFlight: concurrency, next: { () throws(StepError) -> Exchange? in
                    guard let ranges = nextRequest() else { return nil }
                    let start = Int64(ranges.lowerBound) * rangeSize, end = rangeEnd(ranges.upperBound - 1) - 1
                    let exchange = try client.exchange("GET", key: key, headers: [("Range", "bytes=\(start)-\(end)"), ("If-Match", etag)],
                                                       label: "GET \(client.uri(key)) bytes \(start)-\(end)", tag: ranges.lowerBound)
                    requested[ranges.lowerBound] = ranges
                    // Only the bytes asked for, of the object asked for, are written: a range is
                    // handed on as it completes, so nothing of another object may reach the file.
                    exchange.acceptBody = { head in
                        isRange(head, start: start, end: end, size: size)
                            && head.header("etag").map { ETag.unquoted($0) == plainETag } ?? true
                    }
                    var at = start
                    var nextToLand = ranges.lowerBound
                    let stream = writer?.stream(at: start)
                    exchange.sink = { [unowned exchange] bytes in
                        guard at + Int64(bytes.count) <= end + 1 else {
                            exchange.callbackError = .retryable("\(exchange.label): the server sent more than the range", code: "bad_range")
                            return false
                        }
                        do throws(StepError) {
                            if let stream {
                                try stream.append(bytes)
                                at += Int64(bytes.count)
                                try landedByWriter()
                            } else {
                                try partial.write(bytes, at: at)
                                at += Int64(bytes.count)
                                while nextToLand < ranges.upperBound, at >= rangeEnd(nextToLand) {
                                    try landed(nextToLand)
                                    nextToLand += 1
                                }
                            }
                        } catch {
                            exchange.callbackError = error
                            return false
                        }
                        return true
                    }
                    return exchange
                }, done: { (exchange, response) throws(StepError) in
                    let ranges = requested.removeValue(forKey: exchange.tag) ?? exchange.tag ..< exchange.tag + 1
                    let start = Int64(ranges.lowerBound) * rangeSize, length = rangeEnd(ranges.upperBound - 1) - start
                    if response.status == 412 {
                        throw .retryable("\(client.uri(key)) changed while it was downloaded (its ETag is no longer \(etag)); the next attempt starts over",
                                         code: "object_changed")
                    }
                    guard response.isSuccess else { throw client.error(response, label: exchange.label, key: key) }
                    guard isRange(response, start: start, end: start + length - 1, size: size) else {
                        throw .retryable("\(exchange.label): the server answered \(response.status) with Content-Range "
                            + "\(response.header("content-range") ?? "(none)"), not the range asked for", code: "bad_range")
                    }
                    // If-Match is not honoured everywhere (rclone serve s3 ignores it): the answer's ETag
                    // is checked too.
                    if let answered = response.header("etag"), ETag.unquoted(answered) != plainETag {
                        throw .retryable("\(client.uri(key)) changed while it was downloaded (ETag \(answered), not \(etag)); the next attempt starts over",
                                         code: "object_changed")
                    }
                    // The ranges that came whole before a cut are on their way to the journal already.
                    guard exchange.bytesMoved == length else {
                        throw .retryable("\(exchange.label): got \(exchange.bytesMoved) of \(length) bytes", code: "short_body")
                    }
                    try landedByWriter()
                    try syncer.check()
                })
                // The last chunks on their way to the disk.
                writer?.drain()
                try landedByWriter()
            }
        } catch {
            if error.code == "object_changed" {
                writer?.stop()
                syncer.drain()
                try? partial.discard()
                slot.save([:])
            } else {
                // The ranges that landed before the failure are journaled: not fetched again.
                if let writer {
                    writer.drain()
                    for index in writer.landed() {
                        syncer.wrote(index)
                    }
                }
                syncer.drain()
            }
            throw error
        }

        // Every range journaled (a kill from here on refetches nothing), and no fsync left running.
        syncer.drain()
        try syncer.check()
        // Verified before it takes the destination's name: only the tail is left to hash, or the
        // chunks' CRCs to combine.
        let sums: Digests.Sums
        if let writer {
            sums = Digests.Sums(crc64: try writer.crc())
        } else {
            sums = try hash!.finish(at: size)
        }
        do throws(StepError) {
            try expected.check(sums, what: client.uri(key))
            try ObjectChecksum.checkStoredSHA256(sums, answer: head, what: client.uri(key))
        } catch {
            try partial.discard()
            slot.save([:])
            var failure = error
            failure.message += "; the partial file was deleted"
            throw failure
        }
        if case .none = expected {
            step.log(.warn, "\(client.uri(key)) has no CRC-64 or SHA-256 in its metadata and a multipart ETag: only the size is checked")
        }
        if partial.size != size { try partial.file.truncate(to: size) }
        try partial.commit()
        onProgress(size, size)
        return Result(size: size, etag: plainETag, crc64: sums.crc64, sha256: sums.sha256.isEmpty ? nil : S3Crypto.hex(sums.sha256),
                      verified: expected.name, rangesResumed: resumed)
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
