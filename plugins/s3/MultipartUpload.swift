import OrchestrateJSON
import OrchestratePluginFiles
import OrchestratePluginKit
import OrchestrateS3Auth

/// A multipart upload that survives `kill -9`.
///
/// The checkpoint (never a secret in it) is `{"v":1, "bucket", "key", "size", "mtime",
/// "part_size", "sha256", "crc64nvme"?, "upload_id", "parts": [[n, etag, md5?]...], "complete": etag?}`: a
/// part is in `parts` only once the server confirmed it (its ETag; the MD5 is listed only when
/// the ETag is not it). On resume, ListParts is asked: a confirmed part the server has with the
/// same ETag and size is kept, a part the server has that the checkpoint missed (confirmed just
/// before the kill) is kept when its ETag is the local part's MD5, anything else is sent again.
/// CompleteMultipartUpload is idempotent: when the upload is gone (NoSuchUpload) and the object
/// is there with the expected ETag, size and SHA-256, the complete happened before the kill.
struct MultipartUpload {
    struct Result {
        var etag: String
        var sha256: String
        /// The file's CRC-64/NVME (hex), also in the object's metadata; nil for an upload a
        /// build before the CRC began (its metadata has none).
        var crc64: String?
        var parts: Int
        var partsResumed: Int
    }

    let client: S3Client
    let key: String
    let source: SourceFile
    let partSize: Int64
    let concurrency: Int
    let keepParts: Bool
    let contentType: String
    /// Where the upload's state is journaled.
    let slot: CheckpointSlot
    /// Told the bytes confirmed so far (a tree's progress); absent, the step's progress is.
    var onProgress: ((Int64) -> Void)?

    private var step: StepContext { client.step }

    /// A part's number, its ETag and its MD5 (raw).
    struct Part {
        var etag: String
        var md5: [UInt8]
        /// The part's SHA-256 (raw), for CompleteMultipartUpload's ChecksumSHA256; not in the
        /// checkpoint (10,000 of them would not fit): read again from the file when missing.
        var sha256: [UInt8]? = nil
    }

    /// What the checkpoint holds, in memory.
    struct State {
        var partSize: Int64
        var sha256: String
        var crc64: String?
        var uploadID: String?
        var parts: [Int: Part] = [:]
        var completeETag: String?
    }

    init(client: S3Client, key: String, source: SourceFile, partSize: Int64, concurrency: Int, keepParts: Bool, contentType: String,
         slot: CheckpointSlot)
    {
        self.client = client
        self.slot = slot
        self.key = key
        self.source = source
        // At most 10,000 parts, in whole MiB.
        let smallest = (source.size + 9_999) / 10_000
        self.partSize = max(partSize, ((smallest + (1 << 20) - 1) >> 20) << 20)
        self.concurrency = concurrency
        self.keepParts = keepParts
        self.contentType = contentType
    }

    func run() throws(StepError) -> Result {
        let saved = loadSaved()
        // The parts' digests are computed on a thread of their own from the start (those the
        // checkpoint does not list first: they are sent), beside the whole file's SHA-256.
        let partSize = saved?.partSize ?? self.partSize
        let count = Int((source.size + partSize - 1) / partSize)
        let listed = Set(saved?.parts.keys.map { $0 } ?? [])
        let hasher = PartHasher(file: source.file, step: step, order: (1 ... count).filter { !listed.contains($0) } + listed.sorted()) { n in
            let offset = Int64(n - 1) * partSize
            return (offset, min(partSize, source.size - offset))
        }
        defer { hasher.stop() }
        var state: State
        // A checkpoint of a build before the CRC-64 whose upload was not created yet: hashed
        // again, so the object gets its CRC too.
        if let saved, saved.crc64 != nil || saved.uploadID != nil { state = saved } else { state = try start() }
        do {
            return try upload(&state, count: count, hasher: hasher)
        } catch {
            // A retryable failure keeps the upload for the next attempt, unless there is none
            // (an unreachable server is held and tried again without spending an attempt).
            let lastTry = step.isLastAttempt && (error.kind == .retryable || error.kind == .timeout) && error.code != "unreachable"
            if error.kind == .cancelled || error.kind == .permanent || error.kind == .invalidInput || lastTry {
                abort(state, because: error)
            }
            throw error
        }
    }

    /// The checkpoint of this version of the file's upload, if there is one.
    private func loadSaved() -> State? {
        guard let saved = slot.load(), saved["v"]?.intValue == 1, saved["bucket"]?.stringValue == client.bucket,
              saved["key"]?.stringValue == key, saved["size"]?.intValue == source.size, saved["mtime"]?.intValue == source.mtime,
              let size = saved["part_size"]?.intValue, size > 0, let sha = saved["sha256"]?.stringValue else { return nil }
        var state = State(partSize: size, sha256: sha, crc64: saved["crc64nvme"]?.stringValue, uploadID: saved["upload_id"]?.stringValue)
        for entry in saved["parts"]?.arrayValue ?? [] {
            guard let n = entry[0]?.intValue, let etag = entry[1]?.stringValue else { continue }
            let md5 = entry[2]?.stringValue.flatMap(S3Crypto.unhex) ?? S3Crypto.unhex(etag) ?? []
            state.parts[Int(n)] = Part(etag: etag, md5: md5)
        }
        state.completeETag = saved["complete"]?.stringValue
        return state
    }

    /// A new state, after hashing the whole file (its SHA-256 and CRC-64 go in the object's
    /// metadata, which only CreateMultipartUpload can set).
    private func start() throws(StepError) -> State {
        step.log(.info, "hashing \(source.file.path) (SHA-256 and CRC-64, stored in the object's metadata)")
        let sums = try Digests.of(source.file, offset: 0, length: source.size, md5: false, step: step)
        let state = State(partSize: partSize, sha256: S3Crypto.hex(sums.sha256), crc64: CRC64Text.hex(sums.crc64))
        save(state)
        return state
    }

    private func upload(_ state: inout State, count: Int, hasher: PartHasher) throws(StepError) -> Result {
        var resumed = 0
        if let uploadID = state.uploadID {
            if let etag = state.completeETag ?? (state.parts.count == count ? expectedETag(state, count) : nil),
               try objectIsComplete(etag, state)
            {
                step.log(.info, "the multipart upload \(client.uri(key)) was completed before the restart")
                return Result(etag: etag, sha256: state.sha256, crc64: state.crc64, parts: count, partsResumed: count)
            }
            if let server = try listParts(uploadID) {
                resumed = try reconcile(&state, server: server, count: count, hasher: hasher)
                step.log(.info, "resuming the multipart upload of \(client.uri(key)): \(resumed) of \(count) parts are on the server")
            } else {
                step.log(.warn, "the multipart upload \(uploadID) is gone from the server; starting a new one")
                state.uploadID = nil
                state.parts = [:]
            }
        }
        if state.uploadID == nil {
            state.uploadID = try create(state)
            save(state)
        }
        try sendParts(&state, count: count, hasher: hasher)
        let etag = try complete(&state, count: count, hasher: hasher)
        return Result(etag: etag, sha256: state.sha256, crc64: state.crc64, parts: count, partsResumed: resumed)
    }

    // MARK: - Requests

    private func create(_ state: State) throws(StepError) -> String {
        let label = "CreateMultipartUpload \(client.uri(key))"
        var headers = [("Content-Type", contentType), ("x-amz-meta-sha256", state.sha256), ("x-amz-checksum-algorithm", "SHA256")]
        if let crc = state.crc64 { headers.append((ObjectChecksum.metadataHeader, crc)) }
        let response = try client.send("POST", key: key, query: [("uploads", "")], headers: headers, label: label, accept: [200])
        guard let id = XML.value("UploadId", in: response.bodyText), !id.isEmpty else {
            throw .retryable("\(label): the answer has no UploadId", code: "s3_protocol")
        }
        step.log(.info, "started multipart upload of \(client.uri(key)) (\(source.size) bytes in parts of \(state.partSize))")
        return id
    }

    /// The parts the server holds (number → ETag, size), or nil when the upload is gone.
    private func listParts(_ uploadID: String) throws(StepError) -> [Int: (etag: String, size: Int64)]? {
        var parts: [Int: (etag: String, size: Int64)] = [:]
        var marker = 0
        while true {
            var query: [(name: String, value: String)] = [("uploadId", uploadID), ("max-parts", "1000")]
            if marker > 0 { query.append(("part-number-marker", "\(marker)")) }
            let label = "ListParts \(client.uri(key))"
            let response = try client.send("GET", key: key, query: query, label: label, accept: [200, 404])
            if response.status == 404 {
                if XML.value("Code", in: response.bodyText) == "NoSuchUpload" { return nil }
                throw client.error(response, label: label, key: key)
            }
            let body = response.bodyText
            for part in XML.elements("Part", in: body) {
                guard let n = XML.value("PartNumber", in: part).flatMap({ Int($0) }), let etag = XML.value("ETag", in: part),
                      let size = XML.value("Size", in: part).flatMap({ Int64($0) }) else { continue }
                parts[n] = (ETag.unquoted(etag), size)
            }
            guard XML.value("IsTruncated", in: body) == "true", let next = XML.value("NextPartNumberMarker", in: body).flatMap({ Int($0) }),
                  next > marker else { return parts }
            marker = next
        }
    }

    /// Keeps the parts the server has right; returns how many.
    private func reconcile(_ state: inout State, server: [Int: (etag: String, size: Int64)], count: Int,
                           hasher: PartHasher) throws(StepError) -> Int
    {
        var kept: [Int: Part] = [:]
        for (n, held) in server where n >= 1 && n <= count {
            guard held.size == range(of: n, state).length else { continue }
            if let confirmed = state.parts[n], confirmed.etag == held.etag {
                kept[n] = confirmed
            } else if ETag.isMD5(held.etag) {
                // Sent before the kill but not yet in the checkpoint: kept if it is this file's part.
                let (md5, sha256) = try hasher.digests(of: n)
                if S3Crypto.hex(md5) == held.etag.lowercased() { kept[n] = Part(etag: held.etag, md5: md5, sha256: sha256) }
            }
        }
        let lost = state.parts.keys.filter { kept[$0] == nil }
        if !lost.isEmpty { step.log(.warn, "the server lacks \(lost.count) confirmed part(s) (\(lost.sorted().prefix(5).map(String.init).joined(separator: ", "))); sending them again") }
        state.parts = kept
        save(state)
        return kept.count
    }

    /// Sends the parts not on the server yet, `concurrency` at a time, with the digests the
    /// hasher computed ahead; each one confirmed goes into the checkpoint before the next is
    /// handed out.
    private func sendParts(_ state: inout State, count: Int, hasher: PartHasher) throws(StepError) {
        guard let uploadID = state.uploadID else { return }
        var missing = (1 ... count).filter { state.parts[$0] == nil }.makeIterator()
        var inFlight: [Int: (md5: [UInt8], sha256: [UInt8])] = [:]
        var doneBytes = state.parts.keys.reduce(Int64(0)) { $0 + range(of: $1, state).length }
        progress(doneBytes)
        let partSize = state.partSize
        let snapshot = state
        var confirmed = state.parts
        defer { state.parts = confirmed }
        try client.pool.runAll(maxInFlight: concurrency, next: { () throws(StepError) -> Exchange? in
            guard let n = missing.next() else { return nil }
            let (offset, length) = range(of: n, snapshot)
            let (md5, sha256) = try hasher.digests(of: n)
            inFlight[n] = (md5, sha256)
            // The part's SHA-256, signed and as its checksum, is what the server checks; no
            // Content-MD5 beside it: a server that checks one hashes the part once more (`rclone
            // serve s3`: twice, 1.5 s of its CPU per GiB), and the ETag it answers is compared
            // with the MD5 below anyway.
            return try client.exchange("PUT", key: key, query: [("partNumber", "\(n)"), ("uploadId", uploadID)],
                                       headers: [("x-amz-checksum-sha256", S3Crypto.base64(sha256))],
                                       body: .file(source.file, offset: offset, length: length), payloadHash: S3Crypto.hex(sha256),
                                       label: "UploadPart \(n)/\(count) of \(client.uri(key))", tag: n)
        }, done: { (exchange, response) throws(StepError) in
            let n = exchange.tag
            guard response.status == 200 else { throw client.error(response, label: exchange.label, key: key) }
            let (md5, sha256) = inFlight.removeValue(forKey: n) ?? ([], [])
            let etag = ETag.unquoted(response.header("etag") ?? "")
            guard !etag.isEmpty else { throw .retryable("\(exchange.label): the answer has no ETag", code: "s3_protocol") }
            if ETag.isMD5(etag), etag.lowercased() != S3Crypto.hex(md5) {
                throw .retryable("\(exchange.label): the server's ETag \(etag) is not the part's MD5: the bytes changed on the way", code: "etag_mismatch")
            }
            if let answered = response.header("x-amz-checksum-sha256"), answered != S3Crypto.base64(sha256) {
                throw .retryable("\(exchange.label): the server's SHA-256 \(answered) is not the part's: the bytes changed on the way",
                                 code: "checksum_mismatch")
            }
            confirmed[n] = Part(etag: etag, md5: md5, sha256: sha256)
            var current = snapshot
            current.parts = confirmed
            save(current)
            doneBytes += min(partSize, source.size - Int64(n - 1) * partSize)
            progress(doneBytes)
        })
    }

    /// CompleteMultipartUpload, then the object checked. An answer whose ETag is
    /// `md5(part MD5s)-N` of the parts sent proves the object: the server assembled exactly
    /// these parts, each of which it confirmed by its MD5 (so their bytes and sizes), in this
    /// order; the SHA-256 metadata went with CreateMultipartUpload. No HEAD is sent then (some
    /// servers, `rclone serve s3`, read the whole object to answer the first one). Any other
    /// answer (no ETag, or one that is not a multipart ETag) is checked by a HEAD: size, and
    /// the SHA-256 metadata; a multipart ETag that is not the expected one is an error.
    private func complete(_ state: inout State, count: Int, hasher: PartHasher) throws(StepError) -> String {
        guard let uploadID = state.uploadID else { throw .retryable("no upload to complete", code: "s3_protocol") }
        let expected = expectedETag(state, count)
        // Each part's SHA-256 (the upload was created with x-amz-checksum-algorithm SHA256); those
        // of parts an earlier attempt sent come from the hasher (read again from the file).
        var partSHA: [[UInt8]] = []
        for n in 1 ... count {
            if let sha = state.parts[n]?.sha256 { partSHA.append(sha) } else { partSHA.append(try hasher.digests(of: n).sha256) }
        }
        var xml = "<CompleteMultipartUpload xmlns=\"http://s3.amazonaws.com/doc/2006-03-01/\">"
        for n in 1 ... count {
            xml += "<Part><PartNumber>\(n)</PartNumber><ETag>\"\(XML.escape(state.parts[n]!.etag))\"</ETag>"
                + "<ChecksumSHA256>\(S3Crypto.base64(partSHA[n - 1]))</ChecksumSHA256></Part>"
        }
        xml += "</CompleteMultipartUpload>"
        let body = Array(xml.utf8)
        let label = "CompleteMultipartUpload \(client.uri(key))"
        let response = try client.send("POST", key: key, query: [("uploadId", uploadID)], headers: [("Content-Type", "application/xml")],
                                       body: .bytes(body), payloadHash: S3Crypto.hex(S3Crypto.sha256(body)), label: label, accept: [200, 404])
        // A 200 may still carry an error document (the server failed while it assembled the parts).
        let text = response.bodyText
        var etag: String
        // True once something proves the object is the file: the HEAD of a complete recognised
        // after the fact, or the answer's ETag (as this function's comment says).
        var verified = false
        if response.status == 404 || text.contains("<Error>") {
            let code = XML.value("Code", in: text)
            guard code == "NoSuchUpload", try objectIsComplete(expected, state) else {
                throw client.error(Exchange.Response(status: response.status == 200 ? 500 : response.status, headers: response.headers,
                                                     body: response.body), label: label, key: key)
            }
            step.log(.info, "\(label): the upload was already completed (an earlier attempt's complete went through)")
            etag = expected
            verified = true
        } else {
            etag = ETag.unquoted(XML.value("ETag", in: text) ?? "")
            // The object's checksum of checksums, when the server keeps them.
            let composite = S3Crypto.base64(S3Crypto.sha256(partSHA.flatMap { $0 })) + "-\(count)"
            if let answered = XML.value("ChecksumSHA256", in: text), !answered.isEmpty, answered != composite,
               answered != String(composite.prefix { $0 != "-" })
            {
                throw .permanent("\(label): the object's SHA-256 checksum \(answered) is not \(composite), the one of the parts sent",
                                 code: "checksum_mismatch")
            }
        }
        if etag.contains("-") || etag.isEmpty {
            if !etag.isEmpty && etag != expected {
                throw .permanent("\(label): the object's ETag \(etag) is not \(expected), the one of the parts sent", code: "etag_mismatch")
            }
        }
        state.completeETag = etag.isEmpty ? expected : etag
        save(state)
        if etag == expected { verified = true }
        if !verified {
            guard try objectIsComplete(nil, state) else {
                throw .permanent("\(label): the object \(client.uri(key)) does not have the file's size and SHA-256 after the complete",
                                 code: "verify_failed")
            }
        }
        return state.completeETag!
    }

    /// HEAD of the object: true when it has the file's size, SHA-256 metadata (when the server
    /// keeps metadata) and `etag` (when given).
    private func objectIsComplete(_ etag: String?, _ state: State) throws(StepError) -> Bool {
        let response = try client.send("HEAD", key: key, label: "HEAD \(client.uri(key))", accept: [200, 404])
        guard response.status == 200 else { return false }
        let size = response.header("content-length").flatMap { Int64($0) }
        let sha = response.header("x-amz-meta-sha256")
        let serverETag = ETag.unquoted(response.header("etag") ?? "")
        if let etag, serverETag != etag { return false }
        guard size == source.size else { return false }
        guard let sha else {
            // Some S3-compatible servers keep no user metadata: the size and ETag are what is left.
            step.log(.warn, "\(client.uri(key)) has no x-amz-meta-sha256 (the server keeps no metadata?): checked by size and ETag only")
            return true
        }
        return sha == state.sha256
    }

    /// AbortMultipartUpload (unless keep_parts), after a cancel or a permanent failure; its own
    /// failure is logged, not thrown (the step's error is the one that matters).
    private func abort(_ state: State, because error: StepError) {
        guard let uploadID = state.uploadID else { return }
        if keepParts {
            step.log(.warn, "keep_parts: the parts of multipart upload \(uploadID) stay on the server (abort it to stop paying for them)")
            return
        }
        do {
            _ = try client.send("DELETE", key: key, query: [("uploadId", uploadID)], label: "AbortMultipartUpload \(client.uri(key))",
                                accept: [200, 204, 404], cancellable: false)
            step.log(.info, "aborted multipart upload \(uploadID) of \(client.uri(key)) (\(error.kind == .cancelled ? "cancelled" : "failed"))")
            slot.save([:])
        } catch {
            step.log(.warn, "could not abort multipart upload \(uploadID): \(error.message)")
        }
    }

    // MARK: - Helpers

    private func progress(_ bytes: Int64) {
        if let onProgress { onProgress(bytes) } else { step.progress(bytesDone: bytes, bytesTotal: source.size) }
    }

    private func range(of part: Int, _ state: State) -> (offset: Int64, length: Int64) {
        let offset = Int64(part - 1) * state.partSize
        return (offset, min(state.partSize, source.size - offset))
    }

    private func expectedETag(_ state: State, _ count: Int) -> String {
        ETag.multipart((1 ... count).map { state.parts[$0]?.md5 ?? [] })
    }

    private func save(_ state: State) {
        var json: [String: JSONValue] = [
            "v": 1, "bucket": .string(client.bucket), "key": .string(key), "size": .int(source.size), "mtime": .int(source.mtime),
            "part_size": .int(state.partSize), "sha256": .string(state.sha256),
        ]
        if let crc = state.crc64 { json["crc64nvme"] = .string(crc) }
        if let id = state.uploadID { json["upload_id"] = .string(id) }
        json["parts"] = .array(state.parts.keys.sorted().map { n in
            let part = state.parts[n]!
            let md5 = S3Crypto.hex(part.md5)
            return .array(md5 == part.etag.lowercased() ? [.int(Int64(n)), .string(part.etag)]
                : [.int(Int64(n)), .string(part.etag), .string(md5)])
        })
        if let etag = state.completeETag { json["complete"] = .string(etag) }
        slot.save(.object(json))
    }
}
