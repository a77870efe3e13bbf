import OrchestrateJSON
import OrchestratePluginFiles
import OrchestratePluginKit

/// `s3.download`: one object to a file (ObjectDownload.swift), or every object under a prefix
/// into a folder (DownloadTree.swift).
struct DownloadStep: StepDefinition {
    static let id = "s3.download"
    static let version = "0.2.0"
    static let summary = "Download an S3 object or prefix: parallel ranged GETs (If-Match), resumable, verified, atomic rename."
    static let documentation = """
        Downloads `key` to the file `destination`, or every object under `prefix` into the \
        folder `destination` (each to the rest of its key; a key that could leave the folder, \
        `..`, `.`, `//`, a leading `/`, NUL, is skipped with a warning, a key ending in `/` is a \
        folder marker and skipped). Big objects come in ranges of `part_size` (a GET asks for \
        up to 32 MiB of them, `concurrency` GETs at a time), through `.NAME.part`; each file is \
        verified before it is renamed into place: by its CRC-64/NVME (the one s3.upload stores in `x-amz-meta-crc64nvme`, or S3's own \
        full-object checksum), else the SHA-256 an older s3.upload stored, else an MD5 ETag. \
        Finished files and ranges are journaled: a resume fetches only the rest.
        """
    struct Inputs: StepInputs {
        var connection = ConnectionInputs()
        @Input(help: "the object's key (exactly one of key and prefix)", minLength: 1) var key: String?
        @Input(help: "every object under this prefix: \"\" (the whole bucket) or ending with \"/\" (exactly one of key and prefix)")
        var prefix: String?
        @Input(help: "the file's final path (with key), or the folder to fill (with prefix)", minLength: 1) var destination: String
        @Input(help: "bytes per range a download journals (one GET asks for several, up to 32 MiB); a tree's objects up to this size come in one GET each",
               minimum: 1 << 20) var partSize: Int64 = 8 << 20
        @Input(help: "requests in flight at once: ranged GETs of a big object (default 4), or a tree's small objects (default 16)", minimum: 1,
               maximum: 64) var concurrency: Int?
        @Input(help: "keys asked per ListObjectsV2 page (with prefix)", minimum: 1, maximum: 1000) var pageSize = 1000
        @Input(help: "with prefix: the most keys the listing may hold, a bound against a server that lists without end", minimum: 1)
        var maxFiles = ListingBounds.defaultMaxEntries
        @Input(help: "with key: also compute the file's SHA-256 (output sha256) when a CRC-64 verifies it (about 0.5 s of CPU a GiB)")
        var sha256 = false
    }
    static let inputSchema = Inputs.schemaText
    /// `concurrency` unless set: a big object's ranges (each one a stream the disk and the
    /// server keep up with), and a tree's small objects (each one mostly a round trip).
    static let rangeConcurrency = 4
    static let smallObjectConcurrency = 16
    /// What an object's download writes (`size` … `ranges_resumed`) or a prefix's (`files` …
    /// `skipped`), and both `path` and `uri`.
    struct Outputs: StepOutputs {
        @Output(help: "the file or folder written (destination)") var path: String
        @Output(help: "s3://bucket/key or s3://bucket/prefix") var uri: String
        @Output(help: "an object's size", minimum: 0) var size: Int64?
        @Output(help: "an object's ETag (without quotes)") var etag: String?
        @Output(help: "an object's CRC-64/NVME (16 hex digits), computed from the file written", pattern: "^[0-9a-f]{16}$")
        var crc64nvme: String?
        @Output(help: "an object's SHA-256 (hex), computed from the file written: when it verified the file, or sha256: true",
                pattern: LocalFile.sha256Pattern) var sha256: String?
        @Output(help: "what the file was checked against: crc64nvme (the object's x-amz-meta-crc64nvme or S3's checksum), "
                + "sha256 (its x-amz-meta-sha256), md5 (its ETag) or none", schema: ["enum": ["crc64nvme", "sha256", "md5", "none"]])
        var verified: String?
        @Output(help: "an object's ranges an earlier attempt had written, kept", minimum: 0) var rangesResumed: Int64?
        @Output(help: "a prefix's objects downloaded (those an earlier attempt fetched included)", minimum: 0) var files: Int64?
        @Output(help: "a prefix's bytes", minimum: 0) var bytes: Int64?
        @Output(help: "a prefix's files an earlier attempt had fetched, not fetched again", minimum: 0) var filesResumed: Int64?
        @Output(help: "keys under the prefix skipped: unsafe as a local path, or clashing with another", minimum: 0) var skipped: Int64?
    }
    static let outputSchema = Outputs.schemaText

    static func run(_ step: StepContext) throws {
        let inputs = try step.read(Inputs.self)
        let target = try ObjectTarget(key: inputs.key, prefix: inputs.prefix)
        let client = try S3Client(inputs.connection, step: step)
        guard case .key(let key) = target else {
            guard case .prefix(let prefix) = target else { return }
            return try DownloadTree(client: client, inputs: inputs, prefix: prefix).run()
        }
        let destination = inputs.destination
        if let existing = try FileInfo.of(destination), existing.isDirectory {
            throw StepError.invalidInput("destination \(destination) is a folder; give the file's path (or download a prefix into it)",
                                         code: "EISDIR")
        }
        try LocalPath.makeDirectories(LocalPath.parent(of: destination))
        let result = try ObjectDownload.fetch(client, key: key, destination: destination, rangeSize: inputs.partSize,
                                              concurrency: inputs.concurrency ?? rangeConcurrency, sha256: inputs.sha256,
                                              slot: .step(step)) { done, total in
            step.progress(bytesDone: done, bytesTotal: total)
        }
        step.progress(bytesDone: result.size, bytesTotal: result.size)
        step.log(.info, "downloaded \(client.uri(key)) → \(destination) (\(result.size) bytes, verified: \(result.verified))")
        var outputs = Outputs()
        outputs.path = destination
        outputs.uri = client.uri(key)
        outputs.size = result.size
        outputs.etag = result.etag
        outputs.crc64nvme = CRC64Text.hex(result.crc64)
        outputs.sha256 = result.sha256
        outputs.verified = result.verified
        outputs.rangesResumed = Int64(result.rangesResumed)
        try step.setOutputs(outputs)
    }
}
