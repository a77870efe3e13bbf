import OrchestratePluginKit

/// What sftp.upload and sftp.download both output about the files they moved.
struct TreeOutputs: StepOutputs {
    @Output(help: "files moved or kept (1 for a single file)", minimum: 0) var files: Int64
    @Output(help: "bytes of those files", minimum: 0) var bytes: Int64
    @Output(help: "bytes an earlier attempt had already moved", minimum: 0) var resumedBytes: Int64
    @Output(help: "files kept as they were (if_exists)", minimum: 0) var skippedFiles: Int64
    @Output(help: "bytes of the files kept (not sent)", minimum: 0) var skippedBytes: Int64

    init() {}

    /// The figures of `files` files moved by `TreeTransfer.run`.
    init(files: Int, bytes: Int64, resumed: Int64, skipped: (files: Int64, bytes: Int64)) {
        self.files = Int64(files)
        self.bytes = bytes
        resumedBytes = resumed
        skippedFiles = skipped.files
        skippedBytes = skipped.bytes
    }
}
