#if canImport(Glibc)
import Glibc
#endif
import OrchestrateExactPath
import OrchestrateJSON
import OrchestratePluginFiles
import OrchestratePluginKit

/// How files move (`TransferInputs` made ready): chunk size, and how many connections share one big file.
struct TransferOptions {
    /// What a resume may re-send per range, at most this and one read's reply (a reply that
    /// crossed a half): half of it is in flight per file (or per range), and the acknowledged
    /// position is checkpointed every half.
    var chunk: Int
    /// Connections (each with its own handle) writing different ranges of one big file.
    var connections: Int
    /// Files at least this big are split into ranges.
    var parallelThreshold: Int64
    var expectedSHA256: String?
    /// The step's `max_rate`: one token bucket for all its files and ranges together.
    var rateCap: StepRateCap?
    /// What to do with a destination file that exists (`if_exists`).
    var ifExists = IfExists.overwrite
    /// Give each file its source's modification time (`preserve_mtime`).
    var preserveMtime = true

    init(_ inputs: TransferInputs, sha256: String?, step: StepContext) throws(StepError) {
        connections = inputs.connections
        parallelThreshold = inputs.parallelThresholdMiB << 20
        chunk = Int(inputs.chunkKiB) << 10
        expectedSHA256 = sha256?.lowercased()
        rateCap = try StepRateCap.make(inputs.rate, deprecated: .init(inputs.limitKiBps, inputs.$limitKiBps, bytesPerUnit: 1024),
                                       step: step)
        if let e = expectedSHA256, e.count != 64 || !e.allSatisfy(\.isHexDigit) {
            throw .invalidInput("sha256 must be 64 hexadecimal digits")
        }
    }
}

/// How files move, declared once for every sftp transfer step.
struct TransferInputs: StepInputs {
    @Input var connections: Int
    @Input(name: "parallel_threshold_mib", help: "files at least this big (MiB) are split into ranges", minimum: 1)
    var parallelThresholdMiB: Int64 = 64
    var rate = RateCapInputs()
    /// `limit_kibps` (KiB/s, like `sftp -l`), the name before `max_rate`: still read, with a warning.
    @Input(name: "limit_kibps", help: "deprecated: use max_rate (bytes/s); this cap in KiB/s", minimum: 0, deprecated: true)
    var limitKiBps: Int64?
    @Input(name: "chunk_kib", help: "KiB a resume may re-send per range, at most this and one 255 KiB read; half of it is in "
        + "flight per file or range (raise it on long fat links)", minimum: 64, maximum: 65536)
    var chunkKiB: Int64 = 4096

    init() { self.init(connections: 4) }

    /// `connections`: the default of the step that holds these inputs.
    init(connections: Int) {
        _connections = Input(wrappedValue: connections, help: "connections a tree's small files are spread over, and that write ranges of one big file in parallel",
                             minimum: 1, maximum: 16)
    }
}

/// What sftp.upload and sftp.download take besides their source and destination.
struct TreeInputs: StepInputs {
    @Input(help: "files of a tree in flight at once, over all its connections", minimum: 1, maximum: 64) var parallel = 8
    @Input(help: "expected SHA-256 (hex) of the file (a single file only)", pattern: "^[0-9a-fA-F]{64}$") var sha256: String?
    @Input(help: "an existing destination file: overwrite it, skip it, or replace it if-different (size and modification time differ)")
    var ifExists = IfExists.overwrite
    @Input(help: "give each file its source's modification time (to the second over SFTP)") var preserveMtime = true
    var transfer = TransferInputs()
    var server = ServerInputs()
}

/// One file moved through `NAME.partial` and renamed into place, resumable:
/// - one stream: an upload resumes from the partial's size (stat, then write from there); a
///   download from its checkpoint when it has one, else from below the partial's size by the
///   most a hole may lie below it (`holeMargin`: replies land as they arrive);
/// - several ranges: each range's acknowledged position is checkpointed every half chunk (saved
///   before the first byte is written) with half a chunk in flight, so a resume re-sends less
///   than one chunk per range.
final class FileTransfer: @unchecked Sendable {
    struct Result {
        var size: Int64; var sha256: String?; var resumedFrom: Int64
        /// The destination was kept (`if_exists`): nothing was sent.
        var skipped = false
    }

    /// Progress of the current file (absolute bytes).
    var onProgress: (Int64) -> Void = { _ in }
    /// The size of the file about to be uploaded, once it is open.
    var onSize: (Int64) -> Void = { _ in }
    /// Saves this file's range state (nil clears it), when the file has a checkpoint of its own
    /// (a tree moving its files one at a time). Without one, a download of more than one READ
    /// resumes from below its partial's size (`holeMargin`), never from a checkpoint.
    var onCheckpoint: ((JSONValue?) -> Void)?
    /// The most a download without a checkpoint keeps in flight, whatever `chunk_kib` says, so
    /// that `holeMargin` holds for a partial any earlier attempt or run left.
    static let uncheckpointedWindow = 2 << 20
    /// Below a download partial's size, how far a hole may lie when there is no checkpoint to go
    /// by: the most in flight and one READ.
    static let holeMargin = Int64(uncheckpointedWindow + (255 << 10))

    private let session: Session
    private let step: StepContext
    private let options: TransferOptions
    private let lock = Lock()

    init(session: Session, step: StepContext, options: TransferOptions) {
        self.session = session
        self.step = step
        self.options = options
    }

    // MARK: - Upload

    /// Uploads `local` to `remote`, a path relative to `root`'s root (normalised), through its
    /// checked folder (made when missing).
    func upload(local: String, remote: String, root: RootGuard, connection: Connection, checkpoint: JSONValue?) throws(StepError) -> Result {
        let (folder, name) = RootGuard.split(remote)
        guard !name.isEmpty else {
            throw .invalidInput("destination names remote_root \(root.root.path) itself: give a file name below it", code: "path_escape")
        }
        guard root.isKnown(folder) else {
            return try upload(local: local, folder: folder, name: name, root: root, connection: connection, checkpoint: checkpoint)
        }
        do {
            return try upload(local: local, folder: folder, name: name, root: root, connection: connection, checkpoint: checkpoint)
        } catch where error.code == "ENOENT" {
            // The folder was known to exist but is gone (removed on the server during a long
            // session): check (and make) it again, once.
            root.forgetFolders()
            return try upload(local: local, folder: folder, name: name, root: root, connection: connection, checkpoint: checkpoint)
        }
    }

    private func upload(local: String, folder: String, name: String, root: RootGuard, connection: Connection,
                        checkpoint: JSONValue?) throws(StepError) -> Result
    {
        let source = try LocalFile(reading: local)
        let size = source.size
        onSize(size)
        if let expected = options.expectedSHA256 {
            let actual = try source.sha256(upTo: size).digest
            guard actual == expected else {
                throw .permanent("\(local) has SHA-256 \(actual), not \(expected) (the sha256 input)", code: "sha256_mismatch")
            }
        }
        let fs = RemoteFS(connection: connection, step: step)
        let remote = try root.folder(folder, create: true, fs: fs) + "/" + name
        let partial = remote + ".partial"
        let sourceSeconds = IfExists.seconds(source.modifiedNanoseconds)
        if options.ifExists != .overwrite, let current = try fs.lstat(remote), current.isRegular,
           options.ifExists.keeps(size: current.size, modified: current.mtime, sourceSize: size, sourceModified: sourceSeconds)
        {
            return Result(size: size, sha256: options.expectedSHA256, resumedFrom: 0, skipped: true)
        }
        let ranged = size >= options.parallelThreshold && options.connections > 1
        // A file in one stream first tries to create its partial O_EXCL (the usual case, a new
        // file, then costs no LSTAT before it); only when that fails is the partial looked at.
        var fresh: RemoteFile?
        if !ranged {
            do { fresh = try fs.open(partial, .createNew) } catch where error.kind == .permanent {}
        }
        // The partial is never followed: a symlink planted there (to a file outside the root) is
        // removed (REMOVE unlinks the link, not its target) and the upload starts afresh, with
        // the partial created O_EXCL, which fails if a link is planted again in between.
        var existing = fresh == nil ? try fs.lstat(partial) : nil
        if let found = existing, !found.isRegular {
            guard found.isSymlink else { throw .permanent("\(partial) exists on the server and is not a regular file", code: "EEXIST") }
            step.log(.warn, "\(partial) was a symbolic link on the server: removed it without following it, uploading afresh")
            try fs.remove(partial)
            existing = nil
        }
        var ranges: [[Int64]]
        var createFirst = false
        if fresh != nil {
            ranges = [[0, 0, size]]
        } else if ranged {
            if let saved = FileTransfer.ranges(checkpoint, size: size), existing != nil {
                ranges = saved
            } else {
                ranges = FileTransfer.plan(size: size, count: options.connections)
                // The fresh plan is saved first: a kill between the two must not leave an older
                // plan's positions beside the emptied partial.
                onCheckpoint?(FileTransfer.state(ranges, size: size))
                if existing != nil { try fs.remove(partial) }
                try fs.open(partial, .createNew).close()
            }
        } else {
            var offset = existing?.size ?? 0
            if offset > size { offset = 0 }
            if offset == 0 && existing != nil { try fs.remove(partial) }
            // A fresh file is created by the writer's own open (one round trip fewer per file);
            // an empty one has no writer, so it is created here.
            createFirst = offset == 0 && size > 0
            if offset == 0 && size == 0 { fresh = try fs.open(partial, .createNew) }
            ranges = [[0, offset, size]]
        }
        let resumedFrom = ranges.reduce(0) { $0 + $1[1] - $1[0] }
        if resumedFrom > 0 { step.log(.info, "resuming \(remote) at \(resumedFrom) of \(size) bytes") }
        let chunk = options.chunk
        // Half a chunk in flight, checkpointed every half chunk: what the server holds beyond a
        // range's checkpoint (re-sent on resume) stays under one chunk.
        let half = max(chunk / 2, 32 << 10)
        let multiRange = ranges.count > 1
        let times = options.preserveMtime ? (accessed: sourceSeconds, modified: sourceSeconds) : nil
        // One stream ends with `RemoteFile.finish`: times, fsync and close in one round trip.
        var timesRefused: StepError?
        var finished = false
        try runRanges(&ranges, size: size, first: connection, checkpointed: multiRange) { conn, range, report throws(StepError) in
            let file: RemoteFile
            if let opened = fresh {
                file = opened
                fresh = nil
            } else {
                file = try RemoteFS(connection: conn, step: self.step).open(partial, createFirst ? .createNew : .existing)
            }
            // Each range reads through its own descriptor: the kernel's readahead follows one
            // sequential stream per descriptor, and four interleaved ones defeat it. Opened
            // through the first one, so every range reads the file whose size (and checksum) was
            // taken, even if the path was replaced since.
            let reader = multiRange ? try LocalFile(path: "/proc/self/fd/\(source.fd)", flags: O_RDONLY) : source
            var position = range[1]
            // Queued about a MiB at a time (the window, `half`, is what keeps the link full), in
            // whole requests of the server's size: 1 MiB would leave a 4 KiB request behind
            // every four of 255 KiB.
            let request = conn.maximumWrite
            let piece = half >= request ? min(half, 1 << 20) / request * request : half
            var reported = position
            // Reported positions are acknowledged ones: up to `half` more bytes are in flight.
            while position < range[2] {
                let want = Int(min(Int64(piece), range[2] - position))
                try file.write(from: reader, at: position, count: want, window: half)
                position += Int64(want)
                if file.confirmed >= reported + Int64(half) {
                    reported = file.confirmed
                    try report(reported)
                }
            }
            if multiRange {
                try file.flush()
                try report(position)
                try file.sync()
                try file.close()
            } else {
                timesRefused = try file.finish(times: times)
                finished = true
                try report(position)
            }
        }
        if let empty = fresh {  // an empty file: nothing to write
            timesRefused = try empty.finish(times: times)
            finished = true
        }
        if ranges.count > 1, let current = try fs.stat(partial), current.size != size {
            throw .retryable("\(partial) has \(current.size) bytes, expected \(size)", code: "size_mismatch")
        }
        if let times, !finished {
            do { try fs.setTimes(partial, accessed: times.accessed, modified: times.modified) } catch where error.code != "connection_lost" {
                timesRefused = error
            }
        }
        if let timesRefused {
            // A server that refuses the times still gets the file: they are not worth the upload.
            step.log(.warn, "\(remote): the server did not take the modification time (\(timesRefused.message)); the file is uploaded without it")
        }
        try fs.rename(partial, to: remote)
        onCheckpoint?(nil)
        return Result(size: size, sha256: options.expectedSHA256, resumedFrom: resumedFrom)
    }

    // MARK: - Download

    /// Downloads `remote`, a path in a folder `root` checked, to `local`. A symlink there is read
    /// only if the server resolves it inside the root (LSTAT, as cheap as the STAT it replaces).
    func download(remote named: String, local: String, root: RootGuard, connection: Connection, checkpoint: JSONValue?) throws(StepError) -> Result {
        let fs = RemoteFS(connection: connection, step: step)
        guard let found = try root.leaf(named, fs: fs) else { throw .permanent("\(named) does not exist on the server", code: "ENOENT") }
        let (remote, attributes) = found
        guard attributes.isRegular else { throw .permanent("\(remote) is not a regular file", code: "EISDIR") }
        let size = attributes.size
        if options.ifExists != .overwrite, let current = try FileInfo.of(local), current.isRegular,
           options.ifExists.keeps(size: current.size, modified: current.modifiedSeconds, sourceSize: size, sourceModified: attributes.mtime)
        {
            return Result(size: size, sha256: nil, resumedFrom: 0, skipped: true)
        }
        let parent = PathBytes.splitAtLastSlash(local)?.head ?? ""
        if !parent.isEmpty { try LocalPath.makeDirectories(parent) }
        // The checkpoint names the partial: the engine shows it while the step can resume and
        // removes it once nothing can (a cancelled or failed run).
        let named = JSONValue.string(LocalPath.absolute(PartialFile.Naming.suffix.path(for: local)))
        onCheckpoint = onCheckpoint.map { save in
            { (state: JSONValue?) in save(state.map { state in
                guard case .object(var fields) = state else { return state }
                fields["partial"] = named
                return .object(fields)
            }) }
        }
        let existing = try FileInfo.of(PartialFile.Naming.suffix.path(for: local))
        var ranges: [[Int64]]
        let target: PartialFile
        // The connection's I/O thread writes each READ's data as its reply arrives, and a short
        // reply is asked again after the later pieces in flight: the partial of a file bigger
        // than one READ may hold a hole below its size. A checkpoint of each range's in-order end
        // says where to go on (ranged files, and files the tree moves one at a time); without
        // one, the hole can only lie within the last window and piece below the partial's size.
        let oneRead = size <= Int64(connection.maximumRead)
        let checkpointed = !oneRead && onCheckpoint != nil
        if checkpointed, let saved = FileTransfer.ranges(checkpoint, size: size), existing?.isRegular == true {
            ranges = saved
            target = try PartialFile(for: local, naming: .suffix, keeping: .all)
        } else if checkpointed {
            ranges = size >= options.parallelThreshold && options.connections > 1
                ? FileTransfer.plan(size: size, count: options.connections) : [[0, 0, size]]
            onCheckpoint?(FileTransfer.state(ranges, size: size))  // before the partial is emptied
            target = try PartialFile(for: local, naming: .suffix, keeping: .nothing)
        } else {
            var offset = existing?.size ?? 0
            if offset > size { offset = 0 }
            if !oneRead { offset = max(0, offset - FileTransfer.holeMargin) }
            target = try PartialFile(for: local, naming: .suffix, keeping: offset == 0 ? .nothing : .prefix(offset))
            ranges = [[0, offset, size]]
        }
        let resumedFrom = ranges.reduce(0) { $0 + $1[1] - $1[0] }
        if resumedFrom > 0 { step.log(.info, "resuming \(local) at \(resumedFrom) of \(size) bytes") }
        // Half a chunk in flight (without a checkpoint at most `uncheckpointedWindow`).
        let half = checkpointed ? max(options.chunk / 2, 32 << 10) : min(max(options.chunk / 2, 32 << 10), FileTransfer.uncheckpointedWindow)
        try runRanges(&ranges, size: size, first: connection, checkpointed: checkpointed) { conn, range, report throws(StepError) in
            let file = try RemoteFS(connection: conn, step: self.step).open(remote, .read)
            var reported = range[1]
            // The connection's I/O thread writes each piece where it belongs as it arrives;
            // progress and the range checkpoint follow every half chunk of written bytes.
            try file.read(from: range[1], to: range[2], window: half, into: target) { end throws(StepError) in
                if end - reported >= Int64(half) || end == range[2] {
                    reported = end
                    try report(end)
                }
            }
            try file.close()
        }
        var sha: String?
        if let expected = options.expectedSHA256 {
            let actual = try target.file.sha256(upTo: size).digest
            guard actual == expected else {
                try target.discard()
                onCheckpoint?(nil)
                throw .permanent("\(remote) arrived with SHA-256 \(actual), not \(expected) (the sha256 input)", code: "sha256_mismatch")
            }
            sha = actual
        }
        if options.preserveMtime, let modified = attributes.mtime {
            try target.file.setModificationTime(nanoseconds: modified * 1_000_000_000)
        }
        try target.commit()
        onCheckpoint?(nil)
        return Result(size: size, sha256: sha, resumedFrom: resumedFrom)
    }

    // MARK: - Ranges

    typealias RangeBody = (Connection, [Int64], (Int64) throws(StepError) -> Void) throws(StepError) -> Void

    /// Runs `body` for every unfinished range, each on its own connection and thread (the first
    /// on `first`, in this thread). `report(position)` records progress, and the ranges' state
    /// when `checkpointed`; once any range fails, the others stop at their next chunk and the
    /// first error is thrown.
    private func runRanges(_ ranges: inout [[Int64]], size: Int64, first: Connection, checkpointed: Bool,
                           _ body: @escaping RangeBody) throws(StepError)
    {
        let pending = ranges.indices.filter { ranges[$0][1] < ranges[$0][2] }
        guard !pending.isEmpty else { return }
        let shared = RangeState(ranges)
        func run(_ index: Int, _ connection: Connection) throws(StepError) {
            var accounted = shared.ranges[index][1]
            try body(connection, shared.ranges[index]) { position throws(StepError) in
                // Checkpoint first: waiting for bandwidth below must not leave acknowledged bytes
                // out of the checkpoint (a kill during the wait would send them again).
                let (done, snapshot) = shared.update(index, position)
                self.onProgress(done)
                if checkpointed { self.onCheckpoint?(FileTransfer.state(snapshot, size: size)) }
                // The step's max_rate, and the run's and the host's --max-rate, for the bytes
                // this range just moved: the wait delays the range's next bytes.
                let moved = Int(position - accounted)
                accounted = position
                if self.options.rateCap?.consume(moved, step: self.step) == true || self.step.consumeBandwidth(moved) {
                    throw .cancelled("sftp transfer cancelled")
                }
                if let error = shared.error { throw error }
                if self.step.isCancelled { throw .cancelled("sftp transfer cancelled") }
            }
        }
        var workers: [Worker] = []
        for index in pending.dropFirst() {
            workers.append(Worker { [session, step] in
                do {
                    let connection = try session.borrow(step)
                    defer { session.giveBack(connection) }
                    try run(index, connection)
                } catch {
                    shared.fail(error)
                }
            })
        }
        do { try run(pending[0], first) } catch { shared.fail(error) }
        for worker in workers { worker.join() }
        ranges = shared.ranges
        if let error = shared.error { throw error }
    }

    /// Equal ranges, 1 MiB aligned.
    static func plan(size: Int64, count: Int) -> [[Int64]] {
        let step = max(((size / Int64(count)) >> 20) << 20, 1 << 20)
        var ranges: [[Int64]] = []
        var start: Int64 = 0
        while start < size {
            let end = ranges.count == count - 1 ? size : min(size, start + step)
            ranges.append([start, start, end])
            start = end
        }
        return ranges.isEmpty ? [[0, 0, 0]] : ranges
    }

    static func state(_ ranges: [[Int64]], size: Int64) -> JSONValue {
        .object(["size": .int(size), "ranges": .array(ranges.map { .array($0.map { .int($0) }) })])
    }

    static func ranges(_ checkpoint: JSONValue?, size: Int64) -> [[Int64]]? {
        guard let checkpoint, checkpoint["size"]?.intValue == size, let list = checkpoint["ranges"]?.arrayValue else { return nil }
        let ranges = list.compactMap { $0.arrayValue?.compactMap(\.intValue) }.filter { $0.count == 3 }
        return ranges.count == list.count && !ranges.isEmpty ? ranges : nil
    }
}

/// Positions of the ranges of one file, shared by the threads writing them.
private final class RangeState: @unchecked Sendable {
    private let lock = Lock()
    private var _ranges: [[Int64]]
    private var _error: StepError?

    init(_ ranges: [[Int64]]) { _ranges = ranges }

    var ranges: [[Int64]] { lock.withLock { _ranges } }
    var done: Int64 { lock.withLock { _ranges.reduce(0) { $0 + $1[1] - $1[0] } } }
    var error: StepError? { lock.withLock { _error } }

    func update(_ index: Int, _ position: Int64) -> (Int64, [[Int64]]) {
        lock.withLock {
            _ranges[index][1] = position
            return (_ranges.reduce(0) { $0 + $1[1] - $1[0] }, _ranges)
        }
    }

    func fail(_ error: Error) {
        lock.withLock {
            guard _error == nil else { return }
            _error = error as? StepError ?? .permanent("\(error)")
        }
    }
}

/// A download's partial file takes READ data straight from the SFTP channel.
extension PartialFile: ReadSink {}
