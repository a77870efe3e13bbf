import OrchestratePluginKit
import OrchestrateJSON

/// The tus 1.0.0 client (core + creation): the server's `Upload-Offset` is the truth, asked with
/// HEAD before every (re)start and advanced by PATCH chunks; each confirmed offset is
/// checkpointed, so `kill -9` loses at most the chunk in flight.
struct TusUpload {
    let upload: Upload
    let chunkSize: Int64
    let create: Bool
    let metadata: [String: String]
    private var step: StepContext { upload.step }
    private static let version = ["Tus-Resumable": "1.0.0"]

    init(upload: Upload, chunkSize: Int64, create: Bool, metadata: [String: String]) {
        self.upload = upload
        self.chunkSize = chunkSize
        self.create = create
        self.metadata = metadata
    }

    func run() throws(StepError) -> Upload.Result {
        let checkpoint = step.loadCheckpointJSON()
        var uploadURL = checkpoint?["size"]?.intValue == upload.size ? checkpoint?["upload_url"]?.stringValue : nil
        if uploadURL == nil { uploadURL = create ? try createUpload() : upload.url }
        guard let uploadURL else { throw .permanent("no tus upload URL") }
        var offset = try serverOffset(uploadURL)
        let resumedFrom = offset
        if offset > 0 { step.log(.info, "tus: the server has \(offset) of \(upload.size) bytes; continuing from there") }
        var conflicts = 0
        var status = 204
        while offset < upload.size {
            try step.checkCancellation()
            let length = min(chunkSize, upload.size - offset)
            let response = try upload.send("PATCH", uploadURL, headers: Self.version.merging([
                "Upload-Offset": "\(offset)", "Content-Type": "application/offset+octet-stream",
            ]) { $1 }, offset: offset, length: length)
            status = response.status
            switch response.status {
            case 200, 204:
                guard let confirmed = response.header("upload-offset").flatMap({ Int64($0) }) else {
                    throw .permanent("tus: PATCH answered \(response.status) without Upload-Offset (not a tus server?)", code: "tus_protocol")
                }
                // The server may keep fewer bytes than sent, never more, and never fewer than
                // it had: a lying offset would leave a corrupt file on the server.
                if confirmed < offset {
                    throw .permanent("tus: the server's offset went backwards: PATCH at \(offset) answered Upload-Offset \(confirmed)",
                                     code: "tus_protocol")
                }
                if confirmed > offset + length {
                    throw .permanent("tus: PATCH of bytes \(offset)..<\(offset + length) answered Upload-Offset \(confirmed), past what was sent",
                                     code: "tus_protocol")
                }
                if confirmed == offset {
                    throw .retryable("tus: PATCH answered \(response.status) without advancing Upload-Offset", code: "tus_no_progress")
                }
                offset = confirmed
                conflicts = 0
                save(uploadURL, offset)
            case 409:
                // Another writer, or a PATCH the server saw but whose answer was lost: the
                // server's offset is the truth; ask it and continue from there.
                conflicts += 1
                if conflicts > 3 { throw .retryable("tus: repeated offset conflicts (409)", code: "http_409") }
                let previous = offset
                offset = try serverOffset(uploadURL)
                step.log(.warn, "tus: 409 Conflict at offset \(previous); the server has \(offset) bytes, continuing from there")
            case 404, 410:
                throw expired(uploadURL, response)
            default:
                throw HTTPErrors.status(response, method: "PATCH", url: uploadURL)
            }
        }
        return Upload.Result(status: status, resumedFrom: resumedFrom, uploadURL: uploadURL)
    }

    /// HEAD: the offset the server holds (the resume point), checked against the file's size.
    private func serverOffset(_ uploadURL: String) throws(StepError) -> Int64 {
        let response = try upload.send("HEAD", uploadURL, headers: Self.version)
        switch response.status {
        case 200, 204:
            guard let offset = response.header("upload-offset").flatMap({ Int64($0) }) else {
                throw .permanent("tus: HEAD \(uploadURL) has no Upload-Offset (not a tus server?)", code: "tus_protocol")
            }
            if let length = response.header("upload-length").flatMap({ Int64($0) }), length != upload.size {
                throw .permanent("tus: the upload \(uploadURL) was created for \(length) bytes but file has \(upload.size): "
                    + "url is another file's upload (or file changed since)", code: "tus_length_mismatch")
            }
            guard offset >= 0, offset <= upload.size else {
                throw .permanent("tus: HEAD \(uploadURL) claims Upload-Offset \(offset) for a \(upload.size)-byte file", code: "tus_protocol")
            }
            save(uploadURL, offset)
            return offset
        case 405 where !create:
            // tusd and others answer HEAD on their creation endpoint (which takes POST) this way.
            throw .invalidInput("""
                tus: HEAD \(uploadURL) answered 405 (Method Not Allowed): the url looks like a tus creation endpoint, \
                not an upload; set create: true to create the upload there first (or give the upload's own URL)
                """, code: "http_405")
        case 403, 404, 410:
            throw expired(uploadURL, response)
        default:
            throw HTTPErrors.status(response, method: "HEAD", url: uploadURL)
        }
    }

    /// Creation extension: POST Upload-Length (+ metadata); the Location is the upload URL.
    private func createUpload() throws(StepError) -> String {
        var headers = Self.version
        headers["Upload-Length"] = "\(upload.size)"
        if !metadata.isEmpty {
            headers["Upload-Metadata"] = metadata.sorted { $0.key < $1.key }
                .map { "\($0.key) \(Base64.encode(Array($0.value.utf8)))" }.joined(separator: ",")
        }
        if let key = step.idempotencyKey { headers["Idempotency-Key"] = key }
        let response = try upload.send("POST", upload.url, headers: headers, emptyBody: true)
        guard response.status == 201, let location = response.header("location") else {
            if response.status == 201 { throw .permanent("tus: creation answered 201 without a Location", code: "tus_protocol") }
            throw HTTPErrors.status(response, method: "POST", url: upload.url)
        }
        guard let absolute = Redirects.resolve(location, against: upload.url), let from = Origin(upload.url) else {
            throw .permanent("tus: creation answered Location \(location), which is not a URL", code: "tus_protocol")
        }
        if let reason = Redirects.refusal(from: from, to: absolute) {
            throw .permanent("tus: the upload URL the server handed over, \(absolute), is refused: \(reason)", code: "tus_protocol")
        }
        if Origin(absolute) != from {
            step.log(.info, "tus: the upload lives on another origin (\(absolute)): the step's headers are not sent there")
        }
        save(absolute, 0)
        step.log(.info, "tus: created \(absolute)")
        return absolute
    }

    private func save(_ uploadURL: String, _ offset: Int64) {
        step.saveCheckpoint(json: ["upload_url": .string(uploadURL), "offset": .int(offset), "size": .int(upload.size)])
    }

    private func expired(_ uploadURL: String, _ response: Transfer.Response) -> StepError {
        step.saveCheckpoint(json: [:])
        let fix = create ? "orchestrate retry RUN creates a new one" : "give url a new upload, or the creation endpoint with create: true"
        return .permanent("tus: the upload \(uploadURL) has expired or was removed (HTTP \(response.status)); \(fix)",
                          code: "upload_expired")
    }
}

/// Standard base64, for tus Upload-Metadata values.
enum Base64 {
    static func encode(_ bytes: [UInt8]) -> String {
        let table = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/".utf8)
        var out = [UInt8]()
        var i = 0
        while i < bytes.count {
            let b0 = bytes[i], b1 = i + 1 < bytes.count ? bytes[i + 1] : 0, b2 = i + 2 < bytes.count ? bytes[i + 2] : 0
            out.append(table[Int(b0 >> 2)])
            out.append(table[Int((b0 & 3) << 4 | b1 >> 4)])
            out.append(i + 1 < bytes.count ? table[Int((b1 & 15) << 2 | b2 >> 6)] : UInt8(ascii: "="))
            out.append(i + 2 < bytes.count ? table[Int(b2 & 63)] : UInt8(ascii: "="))
            i += 3
        }
        return String(decoding: out, as: UTF8.self)
    }
}

/// Relative Location headers made absolute against the request URL.
enum URLs {
    static func resolve(_ location: String, against base: String) -> String {
        if location.contains("://") { return location }
        // scheme://host[:port] is everything before the first "/" after "://".
        let chars = Array(base)
        var i = 0
        while i + 2 < chars.count, !(chars[i] == ":" && chars[i + 1] == "/" && chars[i + 2] == "/") { i += 1 }
        guard i + 2 < chars.count else { return location }
        var end = i + 3
        while end < chars.count, chars[end] != "/" { end += 1 }
        let origin = String(chars[..<end])
        return location.hasPrefix("/") ? origin + location : origin + "/" + location
    }
}
