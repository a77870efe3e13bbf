import OrchestrateExactPath
import OrchestrateJSON
import OrchestratePluginFiles
import OrchestratePluginKit

/// `sftp.download`: a remote file or tree (under `remote_root`) to a local path.
struct DownloadStep: StepDefinition {
    static let id = "sftp.download"
    static let version = "1.0.0"
    static let summary = "Download a file or a directory tree over SFTP: resumable, atomic, optional SHA-256 check."
    static let documentation = """
        Downloads `source` (a remote path relative to `remote_root`; a file or a directory) to \
        the local `destination`, through `NAME.partial` renamed into place. A later attempt \
        resumes from the checkpointed position of each range (a tree's files moved side by side: \
        from a little below the partial's size, where no hole can lie). With \
        `sha256`, a single file is verified before it is renamed into place.
        """
    struct Inputs: StepInputs {
        @Input(help: "remote path, relative to remote_root", minLength: 1) var source: String
        @Input(help: "local file or directory to create", minLength: 1) var destination: String
        @Input(help: "false: the source must be one file, and a directory is refused (orchestrate copy without --recursive)")
        var recursive = true
        @Input(help: "the most entries (files, folders, skipped names) a tree's listing may hold: a bound against a server that lists without end",
               minimum: 1)
        var maxFiles = ListingBounds.defaultMaxEntries
        var tree = TreeInputs()
    }
    static let inputSchema = Inputs.schemaText
    struct Outputs: StepOutputs {
        @Output(help: "the local file or directory written (destination)") var path: String
        var tree = TreeOutputs()
        @Output(help: "a single file with the sha256 input: that SHA-256 (hex), which the file was checked to have (unless if_exists kept it)",
                pattern: LocalFile.sha256Pattern)
        var sha256: String?
    }
    static let outputSchema = Outputs.schemaText

    static func run(_ step: StepContext) throws {
        let inputs = try step.read(Inputs.self)
        let (sourceRelative, destination) = (inputs.source, inputs.destination)
        var options = try TransferOptions(inputs.tree.transfer, sha256: inputs.tree.sha256, step: step)
        options.ifExists = inputs.tree.ifExists
        options.preserveMtime = inputs.tree.preserveMtime
        let (session, owned) = try Sessions.resolve(inputs.tree.server)
        defer { if owned { session.close() } }
        let connection = try session.shared(step)
        do {
            let fs = RemoteFS(connection: connection, step: step)
            let root = try RemoteRoot(inputs.tree.server.remoteRoot, home: try fs.realpath("."))
            let guardRoot = try RootGuard(root, fs: fs, create: inputs.tree.server.createRoot)
            // The source as the server resolves it: a symlink is followed only to inside the root.
            let named = try root.resolve(sourceRelative)
            guard let found = try guardRoot.entry(try root.relative(sourceRelative), fs: fs) else {
                throw StepError.permanent("source \(named) does not exist on the server", code: "ENOENT")
            }
            let (source, info) = found
            if info.isDirectory && !inputs.recursive {
                throw StepError.invalidInput("source \(named) is a directory, and recursive is false (orchestrate copy: add --recursive)",
                                             code: "is_a_directory")
            }
            var listing = TreeListing(files: [.init(relative: "", size: info.size)])
            if info.isDirectory {
                listing = TreeListing()
                var bounds = ListingBounds(maxEntries: inputs.maxFiles)
                try walk(fs, source, "", depth: 0, into: &listing, bounds: &bounds, step: step)
            }
            let entries = listing.files
            for directory in listing.emptyDirectories {
                try LocalPath.makeDirectories(TreeListing.path(destination, directory))
            }
            let tree = TreeTransfer(step: step, session: session, options: options, parallel: inputs.tree.parallel)
            let result = try tree.run(entries, connection: connection) {
                transfer, conn, entry, state throws(StepError) in
                // The walk entered real directories only: each file's leaf is checked as it is read.
                let remote = TreeListing.path(source, entry.relative)
                let local = TreeListing.path(destination, entry.relative)
                return try transfer.download(remote: remote, local: local, root: guardRoot, connection: conn, checkpoint: state)
            }
            var outputs = Outputs()
            outputs.path = destination
            outputs.tree = TreeOutputs(files: entries.count, bytes: result.bytes, resumed: result.resumed, skipped: result.skipped)
            outputs.sha256 = info.isDirectory ? nil : result.last?.sha256
            try step.setOutputs(outputs)
        }
    }

    /// The regular files under a remote directory, sorted by relative path (`.partial` leftovers
    /// of uploads in progress are skipped), and its empty directories. Symlinks are skipped, never
    /// followed (a listing's attributes are LSTAT's on OpenSSH; a folder is LSTATed before it is
    /// entered all the same, in case another server's listing follows links).
    private static func walk(_ fs: RemoteFS, _ dir: String, _ prefix: String, depth: Int, into listing: inout TreeListing,
                             bounds: inout ListingBounds, step: StepContext) throws(StepError)
    {
        try bounds.enter(depth: depth, folder: dir)
        var holdsAnything = false
        let entries = try fs.list(dir, bounds: &bounds) { shown in
            step.log(.warn, "skipping the entry \"\(shown)\" listed in \(dir): its name is not UTF-8 (rename it on the server to fetch it)")
        }
        for entry in entries.sorted(by: { PathBytes.precedes($0.name, $1.name) }) {
            // A listed name becomes a local path: a server that lists "../x" or "a/b" (hostile,
            // or compromised) must not place a file outside the destination.
            guard PathBytes.isSafeListedName(entry.name) else {
                step.log(.warn, "skipping the entry \(PathBytes.quoted(entry.name)) listed in \(dir): it cannot be one name inside the destination")
                continue
            }
            let relative = prefix.isEmpty ? entry.name : prefix + "/" + entry.name
            let path = dir + "/" + entry.name
            if entry.attributes.isDirectory, try fs.lstat(path)?.isDirectory == true {
                try walk(fs, path, relative, depth: depth + 1, into: &listing, bounds: &bounds, step: step)
                holdsAnything = true
            } else if entry.attributes.isDirectory || entry.attributes.isSymlink {
                step.log(.warn, "skipping \(path): a symbolic link (a tree download follows none)")
            } else if entry.attributes.isRegular && !PathBytes.hasSuffix(entry.name, ".partial") {
                listing.files.append(.init(relative: relative, size: entry.attributes.size))
                holdsAnything = true
            }
        }
        if !holdsAnything { listing.emptyDirectories.append(prefix) }
    }
}
