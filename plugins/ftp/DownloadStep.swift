import OrchestrateExactPath
import OrchestrateJSON
import OrchestratePluginFiles
import OrchestratePluginKit

/// `ftp.download`: a remote file or tree under `remote_root` to a local path.
struct DownloadStep: StepDefinition {
    static let id = "ftp.download"
    static let version = "1.0.0"
    static let summary = "Download a file or a directory tree over FTPS: resumable (REST), atomic, optional SHA-256 check."
    static let documentation = """
        Downloads `source` (a remote path relative to `remote_root`; a file or a folder) to the \
        local `destination`, each file through `NAME.partial` renamed into place. A later attempt \
        goes on from the partial's size with REST. A folder is listed with MLSD (LIST on a server \
        without it); a listed name is used only as one component inside `destination`.
        """
    struct Inputs: StepInputs {
        @Input(help: "remote path, relative to remote_root", minLength: 1) var source: String
        @Input(help: "local file or directory to create", minLength: 1) var destination: String
        @Input(help: "false: the source must be one file, and a folder is refused (orchestrate copy without --recursive)")
        var recursive = true
        @Input(help: "expected SHA-256 of the file (a single file only), checked before it is renamed into place") var sha256: String?
        @Input(help: "files of a tree received at once, each over its own login (control connection)", minimum: 1, maximum: 16)
        var concurrency = 4
        @Input(help: "the most entries (files, folders, skipped names) a tree's listing may hold: a bound against a server that lists without end",
               minimum: 1)
        var maxFiles = ListingBounds.defaultMaxEntries
        var server = ServerInputs()
    }
    static let inputSchema = Inputs.schemaText
    struct Outputs: StepOutputs {
        @Output(help: "the local file or folder written (destination)") var path: String
        var tree = TreeOutputs()
        @Output(help: "a single file with the sha256 input: that SHA-256 (hex), which the file was checked to have",
                pattern: LocalFile.sha256Pattern) var sha256: String?
    }
    static let outputSchema = Outputs.schemaText

    static func run(_ step: StepContext) throws {
        let inputs = try step.read(Inputs.self)
        let expected = inputs.sha256?.lowercased()
        if let expected, expected.count != 64 || !expected.allSatisfy(\.isHexDigit) {
            throw StepError.invalidInput("sha256 must be 64 hexadecimal digits")
        }
        let server = try ServerOptions(inputs.server, step: step)
        let root = try RemoteRoot(inputs.server.remoteRoot)
        let source = try root.relative(inputs.source)
        let destination = inputs.destination
        let client = try FTPClient(server: server, root: root, step: step, rateCap: try StepRateCap.make(inputs.server.rate, step: step))
        guard try client.folder([], create: false) else {
            throw StepError.invalidInput("remote_root \(root.display([])) does not exist on \(server.described)", code: "remote_root_missing")
        }
        var entries: [TreeRun.Entry] = []
        var emptyFolders: [[String]] = []
        let single: FTPClient.FileInfo? = try source.isEmpty ? nil : client.stat(source)
        if let single {
            entries = [.init(relative: [], size: single.size)]
        } else if try client.folder(source, create: false) {
            guard inputs.recursive else {
                throw StepError.invalidInput("source \(root.display(source)) is a folder, and recursive is false (orchestrate copy: add --recursive)",
                                             code: "is_a_directory")
            }
            var bounds = ListingBounds(maxEntries: inputs.maxFiles)
            try walk(client, source, [], files: &entries, emptyFolders: &emptyFolders, bounds: &bounds, step: step)
        } else {
            throw StepError.permanent("source \(root.display(source)) does not exist on \(server.described)", code: "ENOENT")
        }
        for folder in emptyFolders { try LocalPath.makeDirectories(([destination] + folder).joined(separator: "/")) }
        var digest: String?
        let clients = try [client] + client.others(inputs.concurrency - 1)
        let result = try TreeRun(step: step, entries: entries).run(clients) { client, entry, start, progress throws(StepError) in
            let local = ([destination] + entry.relative).joined(separator: "/")
            client.onProgress = progress
            let (resumed, sha) = try download(source + entry.relative, to: local, size: entry.size, client: client, start: start,
                                              expected: single == nil ? nil : expected, step: step)
            if single != nil { digest = sha }
            return resumed
        }
        var outputs = Outputs()
        outputs.path = destination
        outputs.tree = TreeOutputs(files: entries.count, result)
        if single != nil { outputs.sha256 = digest }
        try step.setOutputs(outputs)
    }

    /// Receives one file into `local` through its partial; returns the bytes the partial already
    /// held and, when `expected` is given, the checked SHA-256.
    static func download(_ remote: [String], to local: String, size listed: Int64, client: FTPClient, start: TreeRun.Start,
                         expected: String?, step: StepContext) throws(StepError) -> (Int64, String?)
    {
        guard let info = try client.stat(remote) else {
            throw .permanent("\(client.root.display(remote)) is gone from the server", code: "ENOENT")
        }
        try LocalPath.makeDirectories(LocalPath.parent(of: local))
        let partial = try PartialFile(for: local, naming: .suffix, keeping: .all)
        var offset = partial.size
        // Bytes of another version of the file are not kept: the server's time changed since the
        // partial was started, or the partial is longer than the file.
        if (start.savedMTime != nil && start.savedMTime != info.mtime) || offset > info.size {
            try partial.startOver()
            offset = 0
        }
        start.recordMTime(info.mtime)
        if offset > 0 { step.log(.info, "resuming \(local) at \(offset) of \(info.size) bytes (REST)") }
        if offset < info.size { try client.receive(remote, from: offset, into: partial) }
        guard partial.size == info.size else {
            throw .retryable("\(client.root.display(remote)): \(partial.size) of \(info.size) bytes arrived", code: "size_mismatch")
        }
        var digest: String?
        if let expected {
            let actual = try partial.file.sha256(upTo: info.size).digest
            guard actual == expected else {
                try partial.discard()
                throw .permanent("\(client.root.display(remote)) arrived with SHA-256 \(actual), not \(expected) (the sha256 input)",
                                 code: "sha256_mismatch")
            }
            digest = actual
        }
        try partial.commit()
        return (offset, digest)
    }

    /// The regular files under a remote folder, sorted by relative path (`.partial` leftovers of
    /// uploads in progress are skipped), and its empty folders. What the listing marks as
    /// neither file nor folder (a symbolic link) is skipped with a warning, never followed.
    private static func walk(_ client: FTPClient, _ folder: [String], _ prefix: [String], files: inout [TreeRun.Entry],
                             emptyFolders: inout [[String]], bounds: inout ListingBounds, step: StepContext) throws(StepError)
    {
        try bounds.enter(depth: prefix.count, folder: client.root.display(folder))
        var holdsAnything = false
        let listed = try client.list(folder)
        try bounds.count(listed.count, in: client.root.display(folder))
        for entry in listed.sorted(by: { PathBytes.precedes($0.name, $1.name) }) {
            switch entry.kind {
            case .file(let size) where !PathBytes.hasSuffix(entry.name, ".partial"):
                files.append(.init(relative: prefix + [entry.name], size: size))
                holdsAnything = true
            case .file:
                break
            case .directory:
                try walk(client, folder + [entry.name], prefix + [entry.name], files: &files, emptyFolders: &emptyFolders, bounds: &bounds,
                         step: step)
                holdsAnything = true
            case .other(let what):
                step.log(.warn, "skipping \(client.root.display(folder + [entry.name])): \(what), neither a file nor a folder")
            }
        }
        if !holdsAnything { emptyFolders.append(prefix) }
    }
}
