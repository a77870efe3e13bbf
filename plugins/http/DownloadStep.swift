#if canImport(Glibc)
import Glibc
#endif
import OrchestratePluginFiles
import OrchestrateCurl
import OrchestratePluginKit
import OrchestrateJSON

/// `http.download`: a resumable download to a temporary file beside the destination, renamed
/// into place only when complete (and verified, when `sha256` is given).
///
/// Resume: the bytes already in the partial file are kept and the rest is asked for with
/// `Range` + `If-Range` (the strong ETag, else Last-Modified, recorded in the checkpoint when the
/// first response arrived). A 206 continues; a 200 means the server ignored the range or the
/// resource changed, so the partial file is truncated and the body written from zero; a 416
/// means the partial file is complete already or stale.
struct DownloadStep: StepDefinition {
    static let id = "http.download"
    static let version = "1.0.0"
    static let summary = "Resumable download (Range + If-Range) to a temp file, atomic rename, optional SHA-256 check."
    static let documentation = """
        Downloads `url` to `destination` through `.<name>.part` in the same directory, renamed \
        atomically when complete. After a failure or a crash the next attempt resumes from the \
        bytes on disk with Range + If-Range; a changed resource starts over cleanly. With \
        `sha256`, a mismatch deletes the partial file and fails the step (code sha256_mismatch). \
        `destination` is a file path (one ending in `/`, or an existing directory, is refused). \
        With `max_size`, a larger body (announced or received) deletes the partial file and fails \
        the step (code too_large); without it there is no limit.
        """
    struct Inputs: StepInputs {
        @Input(help: "what to download", minLength: 1) var url: String
        @Input(help: "final path of the file", minLength: 1) var destination: String
        @Input(help: "expected SHA-256 (hex) of the whole file; empty: not checked", pattern: "^([0-9a-fA-F]{64})?$") var sha256: String?
        @Input(help: "the largest file accepted: bytes, or with a K, M or G suffix (10G); default: no limit")
        var maxSize: ByteCount?
        @Input(help: "an existing destination: overwrite it, skip it, or replace it if-different (its size and modification time "
            + "against a HEAD's Content-Length and Last-Modified)")
        var ifExists = IfExists.overwrite
        @Input(help: "give the file the server's Last-Modified as its modification time (curl -R)") var preserveMtime = true
        var transfer = TransferInputs()
    }
    static let inputSchema = Inputs.schemaText
    struct Outputs: StepOutputs {
        @Output(help: "the destination") var path: String
        @Output(help: "bytes of the file", minimum: 0) var size: Int64
        @Output(help: "SHA-256 (hex) of the file", pattern: LocalFile.sha256Pattern) var sha256: String
        @Output(help: "bytes kept from an earlier attempt", minimum: 0) var resumedFrom: Int64
        @Output(help: "the server ignored the range or the file changed") var restarted: Bool
        @Output(help: "the existing destination was kept (if_exists); nothing was downloaded") var skipped: Bool
        @Output(help: "the ETag, or null", nullable: true) var etag: String?
    }
    static let outputSchema = Outputs.schemaText

    static func run(_ step: StepContext) throws {
        let inputs = try step.read(Inputs.self)
        let options = try TransferOptions(inputs.transfer, step: step)
        let (url, destination) = (inputs.url, inputs.destination)
        let expected = inputs.sha256.map { $0.lowercased() }.flatMap { $0.isEmpty ? nil : $0 }
        try checkDestination(destination)
        if let kept = try ExistingDownload.kept(destination, url: url, ifExists: inputs.ifExists, expected: expected,
                                                 options: options, step: step)
        {
            step.log(.info, "\(destination) is already there (if_exists: \(inputs.ifExists.rawValue)); nothing downloaded")
            var outputs = Outputs()
            outputs.path = destination
            outputs.size = kept.size
            outputs.sha256 = kept.sha256
            outputs.resumedFrom = 0
            outputs.restarted = false
            outputs.skipped = true
            outputs.etag = nil
            return try step.setOutputs(outputs)
        }
        let partial = try PartialFile(for: destination, naming: .hiddenPart, keeping: .all)
        var state = DownloadState(step: step, partial: partial, url: url, maxSize: inputs.maxSize?.bytes)
        defer { state.hash.stop() }  // after a failure, nothing hashes on behind the step's back
        try state.restoreFromCheckpoint()
        let resumedFrom = state.offset
        if resumedFrom > 0 { step.log(.info, "resuming \(url) from byte \(resumedFrom)") }

        var response = try state.fetch(options: options)
        if response.status == 416 {
            // The partial file may already hold everything, or the resource shrank: ask the total.
            let total = response.header("content-range").flatMap(ContentRange.total)
            if total != state.offset {
                step.log(.warn, "range not satisfiable at byte \(state.offset); starting over")
                try state.startOver(validator: nil)
                response = try state.fetch(options: options)
            } else {
                response.status = 206
            }
        }
        if let problem = state.rangeError {
            throw StepError.retryable("\(url): \(problem); the partial file was discarded and the next attempt starts over",
                                      code: "bad_content_range")
        }
        guard response.status == 200 || response.status == 206 else {
            let error = HTTPErrors.status(response, method: "GET", url: url)
            if error.kind == .permanent {
                // No attempt will ask again: nothing of this file stays on disk.
                try partial.discard()
                step.saveCheckpoint(json: ["url": .string(url)])
            }
            throw error
        }
        if response.status == 200 && !state.bodyStarted { try state.startOver(validator: state.validator) }
        try state.checkLength(response)

        let digest = state.hash.finish(at: state.offset)
        if let expected, expected != digest {
            try partial.discard()
            step.saveCheckpoint(json: ["url": .string(url)])
            throw StepError.permanent("SHA-256 mismatch for \(url): expected \(expected), got \(digest); the partial file was deleted",
                                      code: "sha256_mismatch")
        }
        if inputs.preserveMtime, let modified = state.lastModified.flatMap(HTTPDate.seconds) {
            try partial.file.setModificationTime(nanoseconds: modified * 1_000_000_000)
        }
        try partial.commit()
        step.saveCheckpoint(json: ["url": .string(url), "done": true])
        step.progress(bytesDone: state.offset, bytesTotal: state.offset)
        step.log(.info, "downloaded \(url) → \(destination) (\(state.offset) bytes)")
        var outputs = Outputs()
        outputs.path = destination
        outputs.size = state.offset
        outputs.sha256 = digest
        outputs.resumedFrom = state.restarted ? 0 : resumedFrom
        outputs.restarted = state.restarted
        outputs.skipped = false
        outputs.etag = state.etag
        try step.setOutputs(outputs)
    }

    /// `destination` must name a file: a directory (a path ending in `/`, `.` or `..`, or an
    /// existing directory) is refused rather than completed with a name from the URL, which the
    /// server (or a redirect) controls.
    static func checkDestination(_ destination: String) throws(StepError) {
        let name = LocalPath.name(of: destination)
        if name.isEmpty || name == "." || name == ".." {
            throw .invalidInput("destination \(destination) names a directory; give the file's path (the directory and the file name)",
                                code: "bad_destination")
        }
        if let existing = try FileInfo.of(destination), existing.isDirectory {
            throw .invalidInput("destination \(destination) is an existing directory; give the file's path (the directory and the file name)",
                                code: "bad_destination")
        }
    }
}

/// The partial file, its running hash, and the validator that ties it to one version of the
/// resource, kept in step with the checkpoint.
struct DownloadState {
    let step: StepContext
    /// `.NAME.part` beside the destination (early write-back included).
    let partial: PartialFile
    let url: String
    var offset: Int64 = 0
    var validator: String?
    var etag: String?
    /// The body's `Last-Modified` (the response that carried it: a 200, or the 206 of a resume).
    var lastModified: String?
    /// The SHA-256 of what is written, computed off the transfer thread.
    let hash: TrailingHash
    var restarted = false
    var bodyStarted = false
    /// Set when a 206 answered another range than the one asked (nothing of it was written).
    var rangeError: String?
    /// Set when writing the partial file failed (ENOSPC, EIO…): reported with its errno instead
    /// of libcurl's generic "Failure writing output to destination".
    var writeError: StepError?
    /// `max_size`: nil for no limit.
    let maxSize: Int64?
    /// Set when the body is (or is announced) larger than `maxSize`.
    var tooLarge: StepError?

    init(step: StepContext, partial: PartialFile, url: String, maxSize: Int64?) {
        self.step = step
        self.partial = partial
        self.url = url
        self.maxSize = maxSize
        hash = TrailingHash(file: partial.file)
    }

    /// Keeps the bytes on disk when the checkpoint says which version they belong to.
    mutating func restoreFromCheckpoint() throws(StepError) {
        let checkpoint = step.loadCheckpointJSON()
        if checkpoint?["url"]?.stringValue == url, let saved = checkpoint?["validator"]?.stringValue, partial.size > 0 {
            validator = saved
            offset = partial.size
            hash.advance(to: offset)  // the kept prefix is hashed in the background
        } else {
            try partial.startOver()
            // Named from the start: the engine shows it while the step can resume and removes
            // it once nothing can (the run cancelled or failed).
            step.saveCheckpoint(json: ["url": .string(url), "partial": .string(LocalPath.absolute(partial.path))])
        }
    }

    /// Drops the partial bytes (a changed resource, or a range the server refused).
    mutating func startOver(validator: String?) throws(StepError) {
        hash.reset()
        try partial.startOver()
        offset = 0
        self.validator = validator
        step.saveCheckpoint(json: ["url": .string(url), "validator": validator.map { .string($0) } ?? .null, "offset": 0,
                                   "partial": .string(LocalPath.absolute(partial.path))])
    }

    /// One GET from `offset` to the end, the body appended to the partial file as it arrives.
    mutating func fetch(options: TransferOptions) throws(StepError) -> Transfer.Response {
        var headers = options.headers
        if offset > 0, let validator {
            headers["Range"] = "bytes=\(offset)-"
            headers["If-Range"] = validator
        }
        let transfer = try Transfer(step: step, method: "GET", url: url, headers: headers, options: options, memoryCap: 64 * 1024)
        let box = Box(self)
        bodyStarted = false
        transfer.acceptBody = { status, head in box.accept(status, head) }
        transfer.sink = { bytes in box.write(bytes) }
        transfer.onProgress = { dlnow, dltotal, _, _ in
            box.state.step.progress(bytesDone: box.base + dlnow, bytesTotal: dltotal > 0 ? box.base + dltotal : -1)
        }
        defer { self = box.state }
        do {
            let response = try transfer.perform()
            box.saveCheckpoint()
            return response
        } catch {
            box.saveCheckpoint()
            if let tooLarge = box.state.tooLarge {
                // Nothing of an over-sized body stays on disk, and no resume will ask for more.
                try? box.state.partial.discard()
                box.state.step.saveCheckpoint(json: ["url": .string(url)])
                throw tooLarge
            }
            if let writeError = box.state.writeError { throw writeError }
            throw error
        }
    }

    /// Records that the file is larger than `max_size` (`size` bytes, at least); false to stop.
    mutating func refuseSize(_ size: Int64, announced: Bool) -> Bool {
        guard let maxSize, size > maxSize else { return true }
        let what = announced ? "announces \(size) bytes" : "sent more than \(maxSize) bytes"
        tooLarge = .permanent("\(url) \(what), more than max_size (\(maxSize) bytes); the partial file was deleted",
                              code: "too_large")
        return false
    }

    /// The received length must match what the server announced (a cut connection can end a
    /// response "successfully" on HTTP/1.0 servers).
    func checkLength(_ response: Transfer.Response) throws(StepError) {
        if response.status == 206, let total = response.header("content-range").flatMap(ContentRange.total), total != offset {
            throw .retryable("\(url): got \(offset) of \(total) bytes", code: "short_body")
        }
    }

    /// Mutable state shared with libcurl's callbacks for one request.
    final class Box {
        var state: DownloadState
        var base: Int64
        var lastSave = MonotonicClock.milliseconds()
        init(_ state: DownloadState) {
            self.state = state
            base = state.offset
        }

        func accept(_ status: Int, _ head: Transfer.Response) -> Bool {
            let newValidator = Self.validator(head)
            state.etag = head.header("etag")
            state.lastModified = head.header("last-modified")
            switch status {
            case 206:
                // Asked: bytes from `offset` to the end. Anything else (another start, a range
                // that stops short of its total, no or garbled Content-Range) is not written.
                let header = head.header("content-range")
                guard let range = header.flatMap(ContentRange.parse), range.start == state.offset, range.end + 1 == range.total else {
                    state.rangeError = "asked for bytes \(state.offset)- but the server answered 206 with Content-Range: \(header ?? "(none)")"
                    do { try state.startOver(validator: nil) } catch { return false }
                    base = 0
                    return false
                }
            case 200:
                if state.offset > 0 {
                    state.step.log(.warn, "the server sent the whole file (range ignored or the file changed); starting over from byte 0")
                    state.restarted = true
                }
                do { try state.startOver(validator: newValidator) } catch { return false }
                base = 0
            default:
                return false
            }
            state.bodyStarted = true
            // An announced size past max_size is refused here: write() then takes no byte of the
            // body (and stops an unannounced one at the limit).
            let total = status == 206 ? head.header("content-range").flatMap(ContentRange.total)
                : head.header("content-length").flatMap { Int64($0.trimmingWhitespace) }
            if let total { _ = state.refuseSize(total, announced: true) }
            return true
        }

        func write(_ bytes: UnsafeRawBufferPointer) -> Bool {
            if state.tooLarge != nil || !state.refuseSize(state.offset + Int64(bytes.count), announced: false) { return false }
            do { try state.partial.write(bytes, at: state.offset) } catch {
                state.writeError = error
                return false
            }
            state.offset += Int64(bytes.count)
            state.hash.advance(to: state.offset)
            let now = MonotonicClock.milliseconds()
            if now - lastSave >= 1000 {
                lastSave = now
                saveCheckpoint()
            }
            return true
        }

        func saveCheckpoint() {
            guard state.validator != nil else { return }
            state.step.saveCheckpoint(json: ["url": .string(state.url), "validator": state.validator.map { .string($0) } ?? .null,
                                             "offset": .int(state.offset), "partial": .string(LocalPath.absolute(state.partial.path))])
        }

        /// A strong ETag, else Last-Modified: what If-Range may carry (weak ETags may not).
        static func validator(_ head: Transfer.Response) -> String? {
            if let etag = head.header("etag"), !etag.hasPrefix("W/") { return etag }
            return head.header("last-modified")
        }
    }
}

/// `Content-Range: bytes START-END/TOTAL` (or `bytes */TOTAL`).
enum ContentRange {
    /// START, END and TOTAL of `bytes START-END/TOTAL`, when well formed (START <= END < TOTAL).
    static func parse(_ value: String) -> (start: Int64, end: Int64, total: Int64)? {
        let text = value.trimmingWhitespace
        guard text.hasPrefix("bytes "), let dash = text.firstIndex(of: "-"), let slash = text.firstIndex(of: "/"), dash < slash,
              let start = Int64(text[text.index(text.startIndex, offsetBy: 6)..<dash].trimmingWhitespace),
              let end = Int64(text[text.index(after: dash)..<slash]),
              let total = Int64(text[text.index(after: slash)...]),
              start >= 0, start <= end, end < total else { return nil }
        return (start, end, total)
    }

    static func start(_ value: String) -> Int64? {
        guard let range = value.split(separator: " ").last, let dash = range.firstIndex(of: "-") else { return nil }
        return Int64(range[..<dash])
    }

    static func total(_ value: String) -> Int64? {
        guard let slash = value.lastIndex(of: "/") else { return nil }
        return Int64(value[value.index(after: slash)...].trimmingWhitespace)
    }
}
