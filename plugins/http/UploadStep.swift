#if canImport(Glibc)
import Glibc
#endif
import OrchestratePluginFiles
import OrchestratePluginKit
import OrchestrateJSON

/// `http.upload`: a file streamed from disk with one of four protocols. The resumable ones (tus,
/// vimeo-streaming) checkpoint the offset the server confirmed and ask the server again before
/// every resume, so a crash or a dropped connection costs at most the unconfirmed bytes.
struct UploadStep: StepDefinition {
    static let id = "http.upload"
    static let version = "1.0.0"
    static let summary = "Upload a file: tus, Vimeo streaming (resumable, verified with the server), or one PUT/POST."
    static let documentation = """
        `protocol`:
        - `tus` (1.0.0 core + creation): HEAD for Upload-Offset before every (re)start, then PATCH \
        chunks of `chunk_size` bytes; with `create: true`, `url` is the creation endpoint (POST \
        with Upload-Length, and `metadata` as Upload-Metadata), else it is the upload URL (a \
        creation endpoint there answers HEAD with 405: the error says to set `create: true`). \
        `metadata` needs `create: true`: it is only ever sent on creation. 409 re-reads the \
        offset; 404/410 is a permanent "upload expired" error. Terminate with an http.request \
        DELETE on `upload_url`.
        - `vimeo-streaming`: PUT with Content-Range: bytes START-END/TOTAL; before a resume, and \
        after the PUT, `PUT Content-Range: bytes */*` must answer 308 with the Range received.
        - `put` / `post`: one request with the whole file; a failure restarts it.
        """
    static let inputSchema = #"""
        {"type":"object","additionalProperties":false,"required":["url","file"],"properties":{
          "url":{"type":"string","minLength":1},
          "file":{"type":"string","minLength":1,"description":"the local file to send"},
          "protocol":{"enum":["tus","vimeo-streaming","put","post"],"description":"default put"},
          "chunk_size":{"type":"integer","minimum":1,"description":"tus PATCH size in bytes (default 64 MiB)"},
          "create":{"type":"boolean","description":"tus: url is a creation endpoint (POST Upload-Length)"},
          "metadata":{"type":"object","additionalProperties":{"type":"string"},"description":"tus creation (needs create: true): Upload-Metadata pairs"},
          "content_type":{"type":"string","description":"put/post: Content-Type (default application/octet-stream)"},
        """# + TransferOptions.schemaProperties + "}," + #"""
          "if":{"required":["metadata"]},
          "then":{"required":["create"],"properties":{"create":{"const":true}},
                  "description":"\#(metadataNeedsCreate)"}}
        """#
    /// Why `metadata` without `create: true` is refused, by `validate` and at run time alike.
    static let metadataNeedsCreate = "tus sends metadata only when it creates the upload: set create: true "
        + "(url is then the creation endpoint) or remove metadata"
    static let outputSchema = #"""
        {"type":"object","properties":{
          "bytes":{"type":"integer"},"status":{"type":"integer"},
          "upload_url":{"description":"tus: the upload's URL"},
          "resumed_from":{"type":"integer","description":"bytes the server already had"},
          "location":{"description":"Location of the last response, or null"},
          "json":{"description":"put/post: the response parsed as JSON, or null"}}}
        """#

    static func run(_ step: StepContext) throws {
        let options = try TransferOptions(step)
        let url = try step.string("url")
        let path = try step.string("file")
        let file = try LocalFile(reading: path)
        let upload = Upload(step: step, options: options, url: url, file: file, size: file.size, session: try CurlSession())
        let result: Upload.Result
        switch try step.optionalString("protocol") ?? "put" {
        case "tus":
            let chunk = try step.optionalInt("chunk_size") ?? 64 << 20
            let metadata = try step.optionalStringMap("metadata")
            let create = try step.bool("create", default: false)
            if metadata != nil && !create { throw StepError.invalidInput("metadata: \(metadataNeedsCreate)") }
            result = try TusUpload(upload: upload, chunkSize: chunk, create: create, metadata: metadata ?? [:]).run()
        case "vimeo-streaming":
            result = try VimeoStreamingUpload(upload: upload).run()
        case "put", "post":
            let method = try step.optionalString("protocol") == "post" ? "POST" : "PUT"
            result = try PlainUpload(upload: upload, method: method,
                                     contentType: try step.optionalString("content_type") ?? "application/octet-stream").run()
        case let other:
            throw StepError.invalidInput("unknown protocol '\(other)' (tus, vimeo-streaming, put, post)")
        }
        step.progress(bytesDone: upload.size, bytesTotal: upload.size)
        step.log(.info, "uploaded \(path) (\(upload.size) bytes) to \(url)" + (result.resumedFrom > 0 ? ", resumed from byte \(result.resumedFrom)" : ""))
        step.setOutput("bytes", .int(upload.size))
        step.setOutput("status", .int(Int64(result.status)))
        step.setOutput("upload_url", result.uploadURL.map { .string($0) } ?? .null)
        step.setOutput("resumed_from", .int(result.resumedFrom))
        step.setOutput("location", result.location.map { .string($0) } ?? .null)
        step.setOutput("json", result.json ?? .null)
    }
}

/// What every upload protocol needs: the step, the options, the file, and a way to send a
/// slice of the file with progress reported against the whole.
struct Upload {
    struct Result {
        var status: Int
        var resumedFrom: Int64 = 0
        var uploadURL: String?
        var location: String?
        var json: JSONValue?
    }

    let step: StepContext
    let options: TransferOptions
    let url: String
    let file: LocalFile
    let size: Int64
    /// One connection cache for all the requests of the upload (kept alive between chunks).
    let session: CurlSession

    /// Sends `method` to `url` with `headers`, and as body the file from `offset` for `length`
    /// bytes (none when length is 0). Progress counts `offset` as already done.
    func send(_ method: String, _ url: String, headers: [String: String], offset: Int64 = 0, length: Int64 = 0,
              emptyBody: Bool = false, freshConnection: Bool = false) throws(StepError) -> Transfer.Response
    {
        var all = options.headers
        for (k, v) in headers { all[k] = v }
        let body: Transfer.Body = length > 0 ? .file(file, offset: offset, length: length) : (emptyBody ? .bytes([]) : .none)
        let transfer = try Transfer(step: step, method: method, url: url, headers: all, body: body, options: options, memoryCap: 1 << 20,
                                    freshConnection: freshConnection)
        let step = self.step, size = self.size
        if length > 0 {
            transfer.onProgress = { _, _, ulnow, _ in step.progress(bytesDone: offset + ulnow, bytesTotal: size) }
        }
        return try transfer.perform(in: session)
    }
}
