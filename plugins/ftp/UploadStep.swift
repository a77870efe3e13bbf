#if canImport(Glibc)
import Glibc
#endif
import OrchestrateExactPath
import OrchestrateJSON
import OrchestratePluginFiles
import OrchestratePluginKit

/// `ftp.upload`: a local file or tree to `destination` under `remote_root`.
struct UploadStep: StepDefinition {
    static let id = "ftp.upload"
    static let version = "1.0.0"
    static let summary = "Upload a file or a directory tree over FTPS: resumable (APPE), renamed into place, confined to remote_root."
    static let documentation = """
        Uploads `source` (a file or a directory) to `destination`, a path relative to \
        `remote_root` (`..` that would leave it is refused). Each file is sent as `NAME.partial` \
        and renamed into place (RNFR/RNTO) once the server's SIZE says every byte is there; a later attempt \
        asks the partial's SIZE and sends the rest with APPE. TLS is required (`tls: explicit`) \
        unless `tls: none` is written.
        """
    struct Inputs: StepInputs {
        @Input(help: "local file or directory", minLength: 1) var source: String
        @Input(help: "remote path, relative to remote_root", minLength: 1) var destination: String
        @Input(help: "send each file as NAME.partial and rename it into place (false: write NAME directly, for a server that refuses RNFR/RNTO)")
        var temporaryName = true
        @Input(help: "expected SHA-256 of the file (a single file only), checked before sending") var sha256: String?
        @Input(help: "files of a tree sent at once, each over its own login (control connection)", minimum: 1, maximum: 16)
        var concurrency = 4
        var server = ServerInputs()
    }
    static let inputSchema = Inputs.schemaText
    struct Outputs: StepOutputs {
        @Output(help: "the remote path written (remote_root joined with destination)") var path: String
        var tree = TreeOutputs()
    }
    static let outputSchema = Outputs.schemaText

    static func run(_ step: StepContext) throws {
        let inputs = try step.read(Inputs.self)
        if let expected = inputs.sha256, expected.count != 64 || !expected.allSatisfy(\.isHexDigit) {
            throw StepError.invalidInput("sha256 must be 64 hexadecimal digits")
        }
        let server = try ServerOptions(inputs.server, step: step)
        let root = try RemoteRoot(inputs.server.remoteRoot)
        let destination = try root.relative(inputs.destination)
        guard !destination.isEmpty else { throw StepError.invalidInput("destination names remote_root itself: name a file or folder in it") }
        guard let info = try OrchestratePluginFiles.FileInfo.of(inputs.source) else {
            throw StepError.invalidInput("source \(inputs.source) does not exist", code: "ENOENT")
        }
        var entries = [TreeRun.Entry(relative: [], size: info.size)]
        var emptyFolders: [[String]] = []
        if info.isDirectory {
            entries = []
            try LocalWalk.walk(inputs.source, [], files: &entries, emptyFolders: &emptyFolders)
            if inputs.temporaryName {
                let clashing = PartialNameClash.clashing(entries.map { $0.relative.joined(separator: "/") })
                for index in clashing.sorted() {
                    step.log(.warn, "skipping \(entries[index].relative.joined(separator: "/")): its name is the partial file of the file beside it")
                }
                if !clashing.isEmpty { entries = entries.enumerated().filter { !clashing.contains($0.offset) }.map(\.element) }
            }
        } else if let expected = inputs.sha256?.lowercased() {
            let actual = try LocalFile(reading: inputs.source).sha256().digest
            guard actual == expected else {
                throw StepError.permanent("\(inputs.source) has SHA-256 \(actual), not \(expected) (the sha256 input)", code: "sha256_mismatch")
            }
        }
        let client = try FTPClient(server: server, root: root, step: step, rateCap: try StepRateCap.make(inputs.server.rate, step: step))
        guard try client.folder([], create: inputs.server.createRoot) else {
            throw StepError.invalidInput("remote_root \(root.display([])) does not exist on \(server.described) (create it, or set create_root: true)",
                                         code: "remote_root_missing")
        }
        for folder in emptyFolders { _ = try client.folder(destination + folder, create: true) }
        let clients = try [client] + client.others(inputs.concurrency - 1)
        let result = try TreeRun(step: step, entries: entries).run(clients) { client, entry, start, progress throws(StepError) in
            let local = ([inputs.source] + entry.relative).joined(separator: "/")
            client.onProgress = progress
            return try upload(local, to: destination + entry.relative, client: client, temporaryName: inputs.temporaryName, start: start, step: step)
        }
        var outputs = Outputs()
        outputs.path = root.display(destination)
        outputs.tree = TreeOutputs(files: entries.count, result)
        try step.setOutputs(outputs)
    }

    /// Sends one file; returns the bytes that were already on the server.
    static func upload(_ local: String, to remote: [String], client: FTPClient, temporaryName: Bool, start: TreeRun.Start,
                       step: StepContext) throws(StepError) -> Int64
    {
        let file = try LocalFile(reading: local)
        let size = file.size
        let mtime = try OrchestratePluginFiles.FileInfo.of(local)?.mtimeNanoseconds ?? 0
        let name = remote.last ?? ""
        let target = temporaryName ? Array(remote.dropLast()) + [name + ".partial"] : remote
        // A partial is resumed unless its source changed since it was started; a file written
        // in place only when the checkpoint says this attempt's file is the one started.
        let mayResume = start.savedMTime == mtime || (start.savedMTime == nil && temporaryName)
        var offset: Int64 = 0
        if mayResume, let existing = try client.stat(target), existing.size <= size { offset = existing.size }
        start.recordMTime(mtime)
        if offset > 0 { step.log(.info, "resuming \(client.root.display(target)) at \(offset) of \(size) bytes (APPE)") }
        if offset < size || size == 0 { try client.send(file, from: offset, to: target, append: offset > 0) }
        // What the server holds, before the rename makes it the file: a data connection cut
        // without the server noticing must not put a short file in place (the next attempt
        // appends the rest).
        let held = try client.stat(target)?.size ?? -1
        guard held == size else {
            throw .retryable("\(client.root.display(target)) holds \(held) bytes on the server after the transfer, not \(size)",
                             code: "size_mismatch")
        }
        if temporaryName { try client.rename(target, to: name) }
        return offset
    }
}

/// The regular files under a local folder (sorted relative paths) and its empty folders.
enum LocalWalk {
    static func walk(_ dir: String, _ prefix: [String], files: inout [TreeRun.Entry], emptyFolders: inout [[String]]) throws(StepError) {
        guard let handle = opendir(dir) else { throw .posix("cannot list \(dir)") }
        var names: [String] = []
        defer { closedir(handle) }
        while let entry = readdir(handle) {
            // Validated, not repaired: a repaired name (U+FFFD) would name another file, or none.
            guard let name = withUnsafeBytes(of: entry.pointee.d_name, { String(validatingCString: $0.bindMemory(to: CChar.self).baseAddress!) })
            else {
                throw .invalidInput("a name in \(dir) is not UTF-8 (a Latin-1 name from an old file server?): rename it to upload this tree",
                                    code: "name_not_utf8")
            }
            if name != "." && name != ".." { names.append(name) }
        }
        var holdsAnything = false
        for name in names.sorted(by: PathBytes.precedes) {
            guard RemoteName.isSafe(name) else { throw .invalidInput("\(dir)/\(name): a control character in a name cannot go into an FTP command") }
            let full = dir + "/" + name
            guard let info = try OrchestratePluginFiles.FileInfo.of(full) else { continue }
            if info.isDirectory {
                try walk(full, prefix + [name], files: &files, emptyFolders: &emptyFolders)
                holdsAnything = true
            } else if info.isRegular {
                files.append(.init(relative: prefix + [name], size: info.size))
                holdsAnything = true
            }
        }
        if !holdsAnything { emptyFolders.append(prefix) }
    }
}
