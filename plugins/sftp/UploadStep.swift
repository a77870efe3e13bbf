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
    static let outputSchema = #"""
        {"type":"object","properties":{"path":{"type":"string"},"files":{"type":"integer"},"bytes":{"type":"integer"},
          "resumed_bytes":{"type":"integer"}}}
        """#

    static func run(_ step: StepContext) throws {
        let inputs = try step.read(Inputs.self)
        let (source, destination) = (inputs.source, inputs.destination)
        let options = try TransferOptions(inputs.tree.transfer, sha256: inputs.tree.sha256, step: step)
        guard let info = try FileInfo.of(source) else { throw StepError.invalidInput("source \(source) does not exist", code: "ENOENT") }
        let (session, owned) = try Sessions.resolve(inputs.tree.server)
        defer { if owned { session.close() } }
        let connection = try session.shared(step)
        do {
            let fs = RemoteFS(connection: connection, step: step)
            let root = try RemoteRoot(inputs.tree.server.remoteRoot, home: try fs.realpath("."))
            let target = try root.resolve(destination)
            let listing = info.isDirectory ? try TreeListing.walk(source) : TreeListing(files: [.init(relative: "", size: info.size)])
            let entries = listing.files
            let guardRoot = RootGuard(root: root, fs: fs)
            for directory in listing.emptyDirectories {
                let remote = TreeListing.path(target, directory)
                try guardRoot.check(parentOf: remote)
                try fs.makeDirectories(remote)
            }
            let tree = TreeTransfer(step: step, session: session, options: options, parallel: inputs.tree.parallel)
            let result = try tree.run(entries, connection: connection) {
                transfer, conn, entry, state throws(StepError) in
                let local = TreeListing.path(source, entry.relative)
                let remote = TreeListing.path(target, entry.relative)
                try guardRoot.check(parentOf: remote)
                return try transfer.upload(local: local, remote: remote, connection: conn, checkpoint: state)
            }
            step.setOutput("path", .string(target))
            step.setOutput("files", .int(Int64(entries.count)))
            step.setOutput("bytes", .int(result.bytes))
            step.setOutput("resumed_bytes", .int(result.resumed))
        }
    }
}

/// Refuses remote parents that the server resolves (through symlinks) outside the root. The
/// threads of a tree use one at once.
final class RootGuard: @unchecked Sendable {
    let root: RemoteRoot
    let fs: RemoteFS
    private let lock = Lock()
    private var checked: Set<String> = []
    private var realRoot: String?

    init(root: RemoteRoot, fs: RemoteFS) {
        self.root = root
        self.fs = fs
    }

    func check(parentOf path: String) throws(StepError) {
        let parent = String(path[..<(path.lastIndex(of: "/") ?? path.startIndex)])
        guard !lock.withLock({ checked.contains(parent) }), let existing = try fs.stat(parent), existing.isDirectory else { return }
        let knownRoot = lock.withLock { realRoot }
        let rootPath = knownRoot ?? ((try? fs.realpath(root.root.isEmpty ? "/" : root.root)) ?? root.root)
        let real = try fs.realpath(parent)
        guard RemoteRootPrefix(rootPath).contains(real) else {
            throw StepError.invalidInput("\(parent) resolves to \(real) on the server, outside remote_root \(root.root)", code: "path_escape")
        }
        lock.withLock {
            realRoot = rootPath
            checked.insert(parent)
        }
    }
}

private struct RemoteRootPrefix {
    let root: String
    init(_ root: String) { self.root = root == "/" ? "" : root }
    func contains(_ path: String) -> Bool { root.isEmpty || path == root || path.hasPrefix(root + "/") }
}
