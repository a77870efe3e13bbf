import OrchestrateJSON
import OrchestratePluginFiles
import OrchestratePluginKit
import OrchestrateS3Auth

/// `s3.upload`: one file to one key. At or below `multipart_threshold`, one PUT; above it, a
/// multipart upload journaled part by part (MultipartUpload.swift), resumable across restarts.
/// Every request's body is signed with its SHA-256 and carries its Content-MD5, so the server
/// checks each byte; the object's ETag is checked against the local MD5s at the end, and the
/// file's SHA-256 is stored in the object's metadata (`x-amz-meta-sha256`) for s3.download to
/// verify end to end.
struct UploadStep: StepDefinition {
    static let id = "s3.upload"
    static let version = "0.1.0"
    static let summary = "Upload a file to S3 (or a compatible service): one PUT, or a resumable parallel multipart upload."
    static let documentation = """
        Uploads `file` to `key` in `bucket`. Above `multipart_threshold` the parts (`part_size`, \
        grown so the file fits in 10,000 parts) go up `concurrency` at a time; each confirmed part \
        is checkpointed, so a resume continues the same upload (reconciled with ListParts). A \
        cancelled or permanently failed multipart upload is aborted unless `keep_parts: true`.
        """
    struct Inputs: StepInputs {
        var connection = ConnectionInputs()
        @Input(help: "the object's key", minLength: 1) var key: String
        @Input(help: "the local file to upload", minLength: 1) var file: String
        @Input(help: "files larger than this go up in parts", minimum: 5 << 20) var multipartThreshold: Int64 = 16 << 20
        @Input(help: "bytes per part (at least 5 MiB; grown so the file fits in 10,000 parts)", minimum: 5 << 20) var partSize: Int64 = 8 << 20
        @Input(help: "parts in flight at once", minimum: 1, maximum: 64) var concurrency = 4
        @Input(help: "leave a cancelled or failed multipart upload's parts on the server (default: abort it)") var keepParts = false
        @Input(help: "the object's Content-Type") var contentType = "application/octet-stream"
    }
    static let inputSchema = Inputs.schemaText
    static let outputSchema = #"""
        {"type":"object","properties":{
          "uri":{"type":"string"},"bucket":{"type":"string"},"key":{"type":"string"},
          "size":{"type":"integer"},"etag":{"type":"string"},"sha256":{"type":"string"},
          "parts":{"type":"integer","description":"0 for a single PUT"},
          "parts_resumed":{"type":"integer","description":"parts an earlier attempt had sent, kept"}}}
        """#

    static func run(_ step: StepContext) throws {
        let inputs = try step.read(Inputs.self)
        let client = try S3Client(inputs.connection, step: step)
        try ObjectKey.check(inputs.key)
        guard let info = try FileInfo.of(inputs.file), info.isRegular else {
            throw StepError.invalidInput("file \(inputs.file) is not a regular file", code: "not_a_file")
        }
        let file = try LocalFile(reading: inputs.file)
        let source = SourceFile(file: file, size: info.size, mtime: info.mtimeNanoseconds)
        let result: MultipartUpload.Result
        if source.size <= inputs.multipartThreshold {
            result = try singlePut(client, key: inputs.key, source: source, contentType: inputs.contentType)
        } else {
            let upload = MultipartUpload(client: client, key: inputs.key, source: source, partSize: inputs.partSize,
                                         concurrency: inputs.concurrency, keepParts: inputs.keepParts, contentType: inputs.contentType)
            result = try upload.run()
        }
        step.progress(bytesDone: source.size, bytesTotal: source.size)
        step.log(.info, "uploaded \(inputs.file) (\(source.size) bytes) to \(client.uri(inputs.key))"
            + (result.parts > 0 ? " in \(result.parts) parts" : "") + (result.partsResumed > 0 ? ", \(result.partsResumed) kept from before" : ""))
        step.setOutput("uri", .string(client.uri(inputs.key)))
        step.setOutput("bucket", .string(client.bucket))
        step.setOutput("key", .string(inputs.key))
        step.setOutput("size", .int(source.size))
        step.setOutput("etag", .string(result.etag))
        step.setOutput("sha256", .string(result.sha256))
        step.setOutput("parts", .int(Int64(result.parts)))
        step.setOutput("parts_resumed", .int(Int64(result.partsResumed)))
    }

    /// One PUT with the whole file: SHA-256 signed, Content-MD5 sent, the ETag compared.
    static func singlePut(_ client: S3Client, key: String, source: SourceFile, contentType: String) throws(StepError) -> MultipartUpload.Result {
        let (md5, sha256) = try Digests.of(source.file, offset: 0, length: source.size, step: client.step)
        let sha = S3Crypto.hex(sha256)
        let label = "PUT \(client.uri(key))"
        let response = try client.send("PUT", key: key, headers: [
            ("Content-MD5", S3Crypto.base64(md5)), ("Content-Type", contentType), ("x-amz-meta-sha256", sha),
        ], body: .file(source.file, offset: 0, length: source.size), payloadHash: sha, label: label, accept: [200])
        let etag = ETag.unquoted(response.header("etag") ?? "")
        if ETag.isMD5(etag), etag.lowercased() != S3Crypto.hex(md5) {
            throw StepError.retryable("\(label): the server's ETag \(etag) is not the file's MD5 \(S3Crypto.hex(md5)): the bytes changed on the way",
                                      code: "etag_mismatch")
        }
        return .init(etag: etag, sha256: sha, parts: 0, partsResumed: 0)
    }
}

/// The file being uploaded, with what identifies its version (a checkpoint of another version
/// is not resumed).
struct SourceFile {
    let file: LocalFile
    let size: Int64
    let mtime: Int64
}

/// Object keys as S3 takes them: 1 to 1024 bytes of UTF-8, no NUL.
enum ObjectKey {
    static func check(_ key: String) throws(StepError) {
        guard !key.isEmpty, key.utf8.count <= 1024, !key.utf8.contains(0) else {
            throw .invalidInput("key must be 1 to 1024 bytes without NUL", code: "bad_key")
        }
    }
}
