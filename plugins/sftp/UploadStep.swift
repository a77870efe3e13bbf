import OrchestrateJSON
import OrchestratePluginFiles
import OrchestratePluginKit

/// `sftp.upload`: a local file or tree to the server, confined to `remote_root`.
struct UploadStep: StepDefinition {
    static let id = "sftp.upload"
    static let version = "1.0.0"
    static let summary = "Upload a file or a directory tree over SFTP: resumable, atomic, confined to remote_root."
    static let documentation = """
        Uploads `source` (a file or a directory) to `destination`, a path relative to \
        `remote_root` (default: the login directory; `..` that would leave it is refused). Each \
        file is written to `NAME.partial` and renamed into place; a later attempt resumes from \
        the bytes the partial already holds (ranged uploads: from the checkpointed ranges). Files \
        of at least `parallel_threshold_mib` are written by `connections` connections in parallel.
        """
    struct Inputs: StepInputs {
        @Input(help: "local file or directory", minLength: 1) var source: String
        @Input(help: "remote path, relative to remote_root", minLength: 1) var destination: String
        var tree = TreeInputs()
    }
    static let inputSchema = Inputs.schemaText
    struct Outputs: StepOutputs {
        @Output(help: "the remote path written (remote_root joined with destination)") var path: String
        var tree = TreeOutputs()
    }
    static let outputSchema = Outputs.schemaText

    static func run(_ step: StepContext) throws {
        let inputs = try step.read(Inputs.self)
        let (source, destination) = (inputs.source, inputs.destination)
        var options = try TransferOptions(inputs.tree.transfer, sha256: inputs.tree.sha256, step: step)
        options.ifExists = inputs.tree.ifExists
        options.preserveMtime = inputs.tree.preserveMtime
        guard let info = try FileInfo.of(source) else { throw StepError.invalidInput("source \(source) does not exist", code: "ENOENT") }
        let (session, owned) = try Sessions.resolve(inputs.tree.server)
        defer { if owned { session.close() } }
        let connection = try session.shared(step)
        do {
            let fs = RemoteFS(connection: connection, step: step)
            let root = try RemoteRoot(inputs.tree.server.remoteRoot, home: try fs.realpath("."))
            let target = try root.resolve(destination)
            let relative = try root.relative(destination)
            var listing = info.isDirectory ? try TreeListing.walk(source) : TreeListing(files: [.init(relative: "", size: info.size)])
            let clashing = PartialNameClash.clashing(listing.files.map(\.relative))
            for index in clashing.sorted() {
                step.log(.warn, "skipping \(listing.files[index].relative): its name is the partial file of the file beside it")
            }
            if !clashing.isEmpty { listing.files = listing.files.enumerated().filter { !clashing.contains($0.offset) }.map(\.element) }
            let entries = listing.files
            let guardRoot = try RootGuard(root, fs: fs, create: inputs.tree.server.createRoot)
            for directory in listing.emptyDirectories {
                _ = try guardRoot.folder(TreeListing.path(relative, directory), create: true, fs: fs)
            }
            let tree = TreeTransfer(step: step, session: session, options: options, parallel: inputs.tree.parallel)
            let result = try tree.run(entries, connection: connection) {
                transfer, conn, entry, state throws(StepError) in
                let local = TreeListing.path(source, entry.relative)
                let remote = TreeListing.path(relative, entry.relative)
                return try transfer.upload(local: local, remote: remote, root: guardRoot, connection: conn, checkpoint: state)
            }
            var outputs = Outputs()
            outputs.path = target
            outputs.tree = TreeOutputs(files: entries.count, bytes: result.bytes, resumed: result.resumed, skipped: result.skipped)
            try step.setOutputs(outputs)
        }
    }
}
