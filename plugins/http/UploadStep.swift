#if canImport(Glibc)
import Glibc
#endif
import OrchestratePluginFiles
import OrchestrateCurl
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
    enum UploadProtocol: String, CaseIterable, InputEnum {
        case tus, vimeoStreaming = "vimeo-streaming", put, post
    }
    struct Inputs: StepInputs {
        @Input(help: "where to send it (tus with create: the creation endpoint)", minLength: 1) var url: String
        @Input(help: "the local file to send", minLength: 1) var file: String
        @Input(name: "protocol", help: "how the file is sent") var uploadProtocol = UploadProtocol.put
        @Input(help: "tus PATCH size in bytes", minimum: 1) var chunkSize: Int64 = 64 << 20
        @Input(help: "tus: url is a creation endpoint (POST Upload-Length)") var create = false
        @Input(help: "tus creation (needs create: true): Upload-Metadata pairs") var metadata: [String: String]?
        @Input(help: "put/post: Content-Type") var contentType = "application/octet-stream"
        var transfer = TransferInputs()

        static var schemaRules: [String: JSONValue] {
            ["if": ["required": ["metadata"]],
             "then": ["required": ["create"], "properties": ["create": ["const": true]], "description": .string(metadataNeedsCreate)]]
        }
    }
    static let inputSchema = Inputs.schemaText
    /// Why `metadata` without `create: true` is refused (by `validate`, and by the host at run time).
    static let metadataNeedsCreate = "tus sends metadata only when it creates the upload: set create: true "
        + "(url is then the creation endpoint) or remove metadata"
    struct Outputs: StepOutputs {
        @Output(help: "bytes of the file", minimum: 0) var bytes: Int64
        @Output(help: "the HTTP status of the last response") var status: Int
        @Output(name: "upload_url", help: "tus: the upload's URL; null for the other protocols", nullable: true) var uploadURL: String?
        @Output(help: "bytes the server already had", minimum: 0) var resumedFrom: Int64
        @Output(help: "Location of the last response, or null", nullable: true) var location: String?
        @Output(help: "put/post: the response parsed as JSON, or null", nullable: true) var json: JSONValue?
    }
    static let outputSchema = Outputs.schemaText

    static func run(_ step: StepContext) throws {
        let inputs = try step.read(Inputs.self)
        let options = try TransferOptions(inputs.transfer, step: step)
        let (url, path) = (inputs.url, inputs.file)
        let file = try LocalFile(reading: path)
        let upload = Upload(step: step, options: options, url: url, file: file, size: file.size, session: try CurlMulti())
        let result: Upload.Result
        switch inputs.uploadProtocol {
        case .tus:
            // metadata without create never gets here: the host checks the schema's if/then.
            result = try TusUpload(upload: upload, chunkSize: inputs.chunkSize, create: inputs.create,
                                   metadata: inputs.metadata ?? [:]).run()
        case .vimeoStreaming:
            result = try VimeoStreamingUpload(upload: upload).run()
        case .put, .post:
            result = try PlainUpload(upload: upload, method: inputs.uploadProtocol == .post ? "POST" : "PUT",
                                     contentType: inputs.contentType).run()
        }
        step.progress(bytesDone: upload.size, bytesTotal: upload.size)
        step.log(.info, "uploaded \(path) (\(upload.size) bytes) to \(url)" + (result.resumedFrom > 0 ? ", resumed from byte \(result.resumedFrom)" : ""))
        var outputs = Outputs()
        outputs.bytes = upload.size
        outputs.status = result.status
        outputs.uploadURL = result.uploadURL
        outputs.resumedFrom = result.resumedFrom
        outputs.location = result.location
        outputs.json = result.json
        try step.setOutputs(outputs)
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
    let session: CurlMulti

    /// Sends `method` to `url` with `headers`, and as body the file from `offset` for `length`
    /// bytes (none when length is 0). Progress counts `offset` as already done.
    func send(_ method: String, _ url: String, headers: [String: String], offset: Int64 = 0, length: Int64 = 0,
              emptyBody: Bool = false, freshConnection: Bool = false) throws(StepError) -> Transfer.Response
    {
        // A URL the server handed over (a tus Location) on another origin than the step's url
        // gets the protocol's headers only: the step's `headers` (an API key, Authorization)
        // are for the server the workflow names, as with a redirect that leaves it.
        var all = Origin(url) == Origin(self.url) ? options.headers : [:]
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
