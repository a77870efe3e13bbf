import OrchestratePluginKit

/// What ftp.upload and ftp.download both output about the files they moved.
struct TreeOutputs: StepOutputs {
    @Output(help: "files moved (1 for a single file)", minimum: 0) var files: Int64
    @Output(help: "bytes of those files", minimum: 0) var bytes: Int64
    @Output(help: "bytes an earlier attempt had already moved (finished files and partials), not moved again", minimum: 0)
    var resumedBytes: Int64

    init() {}

    /// The figures of `files` files moved by `TreeRun.run`.
    init(files: Int, _ result: (bytes: Int64, resumed: Int64)) {
        self.files = Int64(files)
        bytes = result.bytes
        resumedBytes = result.resumed
    }
}
