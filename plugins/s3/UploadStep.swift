import OrchestrateJSON
import OrchestratePluginFiles
import OrchestratePluginKit
import OrchestrateS3Auth

/// `s3.upload`: a file to one key, or a folder's files under a prefix (UploadTree.swift). A file
/// at or below `multipart_threshold` goes up in one PUT; a bigger one in a multipart upload
/// journaled part by part (MultipartUpload.swift), resumable across restarts. Every request's
/// body is signed with its SHA-256 and carries its Content-MD5, so the server checks each byte;
/// the object's ETag is checked against the local MD5s at the end, and the file's SHA-256 is
/// stored in the object's metadata (`x-amz-meta-sha256`) with its CRC-64/NVME
/// (`x-amz-meta-crc64nvme`, what s3.download verifies with, end to end).
struct UploadStep: StepDefinition {
    static let id = "s3.upload"
    static let version = "0.2.0"
    static let summary = "Upload a file or a folder to S3 (or a compatible service): one PUT, or a resumable parallel multipart upload."
    static let documentation = """
        Uploads `source`: a file to `key`, or a folder's regular files under `prefix` (each to \
        prefix + its path relative to the folder; symbolic links are skipped, not followed). \
        Above `multipart_threshold` a file's parts (`part_size`, grown so the file fits in \
        10,000 parts) go up `concurrency` at a time; each confirmed part is checkpointed, so a \
        resume continues the same upload (reconciled with ListParts). A tree's small files go up \
        `concurrency` at a time, its big ones one after the other in parts; finished files are \
        journaled and not sent again on resume. A cancelled or permanently failed multipart \
        upload is aborted unless `keep_parts: true`.
        """
    struct Inputs: StepInputs {
        var connection = ConnectionInputs()
        @Input(help: "a local file (with key) or folder (with prefix)", minLength: 1) var source: String
        @Input(help: "the object's key, for a file (exactly one of key and prefix)", minLength: 1) var key: String?
        @Input(help: "the prefix a folder's files go under: \"\" (the bucket's root) or ending with \"/\" (exactly one of key and prefix)")
        var prefix: String?
        @Input(help: "files larger than this go up in parts", minimum: 5 << 20) var multipartThreshold: Int64 = 16 << 20
        @Input(help: "bytes per part (at least 5 MiB; grown so the file fits in 10,000 parts)", minimum: 5 << 20) var partSize: Int64 = 8 << 20
        @Input(help: "requests in flight at once: a big file's parts, or a tree's small files", minimum: 1, maximum: 64) var concurrency = 4
        @Input(help: "leave a cancelled or failed multipart upload's parts on the server (default: abort it)") var keepParts = false
        @Input(help: "the objects' Content-Type") var contentType = "application/octet-stream"
    }
    static let inputSchema = Inputs.schemaText
    /// What a file's upload writes (`key` … `parts_resumed`) or a folder's (`prefix` … `skipped`),
    /// and both `uri` and `bucket`.
    struct Outputs: StepOutputs {
        @Output(help: "s3://bucket/key, or s3://bucket/prefix for a folder") var uri: String
        @Output(help: "the bucket") var bucket: String
        @Output(help: "a file's key") var key: String?
        @Output(help: "a folder's prefix") var prefix: String?
        @Output(help: "a file's size", minimum: 0) var size: Int64?
        @Output(help: "a file's ETag (without quotes)") var etag: String?
        @Output(help: "a file's SHA-256 (hex), also in the object's x-amz-meta-sha256", pattern: LocalFile.sha256Pattern) var sha256: String?
        @Output(help: "a file's CRC-64/NVME (16 hex digits), also in the object's x-amz-meta-crc64nvme", pattern: "^[0-9a-f]{16}$")
        var crc64nvme: String?
        @Output(help: "a file's parts: 0 for a single PUT", minimum: 0) var parts: Int64?
        @Output(help: "a file's parts an earlier attempt had sent, kept", minimum: 0) var partsResumed: Int64?
        @Output(help: "a folder's files uploaded (those an earlier attempt sent included)", minimum: 0) var files: Int64?
        @Output(help: "a folder's bytes", minimum: 0) var bytes: Int64?
        @Output(help: "a folder's files an earlier attempt had sent, not sent again", minimum: 0) var filesResumed: Int64?
        @Output(help: "entries of a folder skipped: symbolic links, special files, names not UTF-8", minimum: 0) var skipped: Int64?
    }
    static let outputSchema = Outputs.schemaText

    static func run(_ step: StepContext) throws {
        let inputs = try step.read(Inputs.self)
        // It goes into a header line: a CR or LF would end it and start another (x-amz-acl: public-read).
        guard !inputs.contentType.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) else {
            throw StepError.invalidInput("content_type holds a line break or a NUL: it would end its header and start another",
                                         code: "bad_header")
        }
        let target = try ObjectTarget(key: inputs.key, prefix: inputs.prefix)
        guard let info = try FileInfo.of(inputs.source) else {
            throw StepError.invalidInput("source \(inputs.source) does not exist", code: "ENOENT")
        }
        let client = try S3Client(inputs.connection, step: step)
        switch target {
        case .key(let key):
            guard info.isRegular else {
                throw StepError.invalidInput("source \(inputs.source) is not a regular file: a folder goes under a prefix (prefix: \"name/\"), not a key",
                                             code: "not_a_file")
            }
            try uploadFile(inputs, key: key, info: info, client: client, step: step)
        case .prefix(let prefix):
            guard info.isDirectory else {
                throw StepError.invalidInput("source \(inputs.source) is not a folder: a file goes to a key (key: ...), not a prefix",
                                             code: "not_a_folder")
            }
            try UploadTree(client: client, inputs: inputs, prefix: prefix).run()
        }
    }

    static func uploadFile(_ inputs: Inputs, key: String, info: FileInfo, client: S3Client, step: StepContext) throws(StepError) {
        let file = try LocalFile(reading: inputs.source)
        let source = SourceFile(file: file, size: info.size, mtime: info.mtimeNanoseconds)
        let result: MultipartUpload.Result
        if source.size <= inputs.multipartThreshold {
            result = try singlePut(client, key: key, source: source, contentType: inputs.contentType)
        } else {
            let upload = MultipartUpload(client: client, key: key, source: source, partSize: inputs.partSize, concurrency: inputs.concurrency,
                                         keepParts: inputs.keepParts, contentType: inputs.contentType, slot: .step(step))
            result = try upload.run()
        }
        step.progress(bytesDone: source.size, bytesTotal: source.size)
        step.log(.info, "uploaded \(inputs.source) (\(source.size) bytes) to \(client.uri(key))"
            + (result.parts > 0 ? " in \(result.parts) parts" : "") + (result.partsResumed > 0 ? ", \(result.partsResumed) kept from before" : ""))
        var outputs = Outputs()
        outputs.uri = client.uri(key)
        outputs.bucket = client.bucket
        outputs.key = key
        outputs.size = source.size
        outputs.etag = result.etag
        outputs.sha256 = result.sha256
        outputs.crc64nvme = result.crc64
        outputs.parts = Int64(result.parts)
        outputs.partsResumed = Int64(result.partsResumed)
        try step.setOutputs(outputs)
    }

    /// One PUT with the whole file: SHA-256 signed, Content-MD5 sent, the ETag compared.
    static func singlePut(_ client: S3Client, key: String, source: SourceFile, contentType: String) throws(StepError) -> MultipartUpload.Result {
        let put = try SinglePut(client, key: key, source: source, contentType: contentType)
        return try put.check(try client.pool.run(put.exchange))
    }
}

/// A PUT of a whole file (at most `multipart_threshold`): its digests are computed first, the
/// body streams from the file; run alone or beside others (a tree's small files).
struct SinglePut {
    let exchange: Exchange
    let key: String
    let md5: [UInt8]
    let sha256: String
    let crc64: String
    /// The SHA-256 as x-amz-checksum-sha256 carries it (base64).
    private let checksum: String
    private let client: S3Client

    init(_ client: S3Client, key: String, source: SourceFile, contentType: String, tag: Int = 0) throws(StepError) {
        let sums = try Digests.of(source.file, offset: 0, length: source.size, step: client.step)
        self.client = client
        self.key = key
        md5 = sums.md5
        sha256 = S3Crypto.hex(sums.sha256)
        crc64 = CRC64Text.hex(sums.crc64)
        checksum = S3Crypto.base64(sums.sha256)
        exchange = try client.exchange("PUT", key: key, headers: [
            ("Content-MD5", S3Crypto.base64(sums.md5)), ("Content-Type", contentType), ("x-amz-meta-sha256", sha256),
            (ObjectChecksum.metadataHeader, crc64),
            // (The SDKs' algorithm header too: moto keeps the checksum only with it.)
            ("x-amz-checksum-sha256", checksum), ("x-amz-sdk-checksum-algorithm", "SHA256"),
        ], body: .file(source.file, offset: 0, length: source.size), payloadHash: self.sha256, label: "PUT \(client.uri(key))", tag: tag)
    }

    /// The server's answer checked: 200, and an MD5 ETag equal to the file's.
    func check(_ response: Exchange.Response) throws(StepError) -> MultipartUpload.Result {
        guard response.status == 200 else { throw client.error(response, label: exchange.label, key: key) }
        let etag = ETag.unquoted(response.header("etag") ?? "")
        if ETag.isMD5(etag), etag.lowercased() != S3Crypto.hex(md5) {
            throw StepError.retryable("\(exchange.label): the server's ETag \(etag) is not the file's MD5 \(S3Crypto.hex(md5)): the bytes changed on the way",
                                      code: "etag_mismatch")
        }
        if let answered = response.header("x-amz-checksum-sha256"), answered != checksum {
            throw StepError.retryable("\(exchange.label): the server's SHA-256 \(answered) is not the file's: the bytes changed on the way",
                                      code: "checksum_mismatch")
        }
        return .init(etag: etag, sha256: sha256, crc64: crc64, parts: 0, partsResumed: 0)
    }
}

/// The file being uploaded, with what identifies its version (a checkpoint of another version
/// is not resumed).
struct SourceFile {
    let file: LocalFile
    let size: Int64
    let mtime: Int64
}
