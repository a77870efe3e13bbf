import OrchestrateExactPath
import OrchestratePluginFiles
import OrchestratePluginKit

/// The SFTP file operations the steps need, as requests on one connection's shared channel.
/// Any number of RemoteFS values (threads) may use one connection at once. `step` is whose
/// cancellation ends a wait.
struct RemoteFS {
    let connection: Connection
    let step: StepContext
    private var channel: SFTPChannel { connection.channel }

    typealias Attributes = SFTP.Attributes

    /// Attributes of `path` (following symlinks), or nil when it does not exist.
    func stat(_ path: String) throws(StepError) -> Attributes? { try attributes(.stat, path) }

    /// Attributes of `path` itself (a symlink is not followed), or nil when it does not exist.
    func lstat(_ path: String) throws(StepError) -> Attributes? { try attributes(.lstat, path) }

    private func attributes(_ request: SFTP.Packet, _ path: String) throws(StepError) -> Attributes? {
        var reply = try channel.call(request, step) { $0.string(path) }
        if reply.type == SFTP.Packet.status.rawValue {
            let (code, message) = try RemoteFS.status(&reply)
            if code == SFTP.Status.noSuchFile || code == SFTP.Status.noSuchPath { return nil }
            throw SFTPStatus.error("stat \(path)", status: code, message: message)
        }
        guard reply.type == SFTP.Packet.attributes.rawValue else { throw WireReader.malformed }
        return try reply.reader.attributes()
    }

    /// Creates the directory `path` (its parent must exist; an existing name is an error).
    func makeDirectory(_ path: String) throws(StepError) {
        try expectOK("mkdir \(path)", try channel.call(.mkdir, step) { $0.string(path); $0.attributes(permissions: 0o755) })
    }

    /// `mkdir -p`: creates each missing component of the absolute `path`, following symlinks on
    /// the way. Only for `remote_root` itself (`create_root: true`): the workflow names it, so
    /// it is trusted; every path below it goes through `RootGuard`.
    func makeDirectories(_ path: String) throws(StepError) {
        var current = ""
        for component in PathBytes.components(path, omittingEmpty: true) {
            current += "/" + component
            if let existing = try stat(current) {
                guard existing.isDirectory else { throw .permanent("\(current) exists and is not a directory", code: "ENOTDIR") }
                continue
            }
            let dir = current
            do {
                try makeDirectory(dir)
            } catch {
                // Another transfer may have created it meanwhile.
                if try stat(dir)?.isDirectory != true { throw error }
            }
        }
    }

    /// Renames `from` over `to`, replacing it atomically with OpenSSH's posix-rename extension
    /// (libssh2 1.10's own SFTP layer could not send it).
    /// A server without it refuses to rename onto an existing file (SFTP v3), so there the old
    /// file is renamed aside (`NAME.orchestrate-replaced`), the new one into place, then the old
    /// one removed: the old bytes exist until the new ones are in place, and go back if the
    /// second rename fails.
    func rename(_ from: String, to: String) throws(StepError) {
        if connection.supports("posix-rename@openssh.com") {
            try expectOK("rename \(from)", try channel.call(.extended, step) {
                $0.string("posix-rename@openssh.com"); $0.string(from); $0.string(to)
            })
            // An aside file is left only by a crash inside the fallback's window (an older
            // version, or another server); remove it without waiting for the answer.
            let aside = to + ".orchestrate-replaced"
            _ = try? channel.send(.remove) { $0.string(aside) }
            return
        }
        do {
            try plainRename(from, to)
        } catch where error.kind == .permanent {
            guard try lstat(to) != nil else { throw error }
            let aside = to + ".orchestrate-replaced"
            if try lstat(aside) != nil { try remove(aside) }  // left by a crash inside this window
            try plainRename(to, aside)
            do {
                try plainRename(from, to)
            } catch {
                try? plainRename(aside, to)
                throw error
            }
            try? remove(aside)
        }
    }

    private func plainRename(_ from: String, _ to: String) throws(StepError) {
        try expectOK("rename \(from)", try channel.call(.rename, step) { $0.string(from); $0.string(to) })
    }

    /// Sets the access and modification times of `path` (seconds since the epoch), as `touch -d`
    /// does. SETSTAT follows a symlink: only for a path the step made itself (its partial).
    func setTimes(_ path: String, accessed: Int64, modified: Int64) throws(StepError) {
        try expectOK("setstat \(path)", try channel.call(.setstat, step) { $0.string(path); $0.attributes(accessed: accessed, modified: modified) })
    }

    func remove(_ path: String) throws(StepError) {
        try expectOK("remove \(path)", try channel.call(.remove, step) { $0.string(path) })
    }

    /// The server's canonical form of `path` (symlinks resolved).
    func realpath(_ path: String) throws(StepError) -> String {
        var reply = try channel.call(.realpath, step) { $0.string(path) }
        if reply.type == SFTP.Packet.status.rawValue {
            let (code, message) = try RemoteFS.status(&reply)
            throw SFTPStatus.error("realpath \(path)", status: code, message: message)
        }
        guard reply.type == SFTP.Packet.name.rawValue, try reply.reader.u32() >= 1 else { throw WireReader.malformed }
        return try reply.reader.string()
    }

    /// How `open` opens a file. Writing never uses APPEND: writes go to explicit offsets so a
    /// resume can start anywhere.
    enum OpenMode {
        case read
        /// A new file (`O_CREAT|O_EXCL`): fails if the name exists, a symlink planted there
        /// included, so a fresh partial is never created through a link.
        case createNew
        /// An existing file, for writing (never created here).
        case existing
    }

    func open(_ path: String, _ mode: OpenMode) throws(StepError) -> RemoteFile {
        let flags: SFTP.OpenFlags = switch mode {
        case .read: [.read]
        case .createNew: [.write, .create, .exclusive]
        case .existing: [.write]
        }
        let handle = try self.handle("open \(path)", try channel.call(.open, step) {
            $0.string(path); $0.u32(flags.rawValue); $0.attributes(permissions: mode == .createNew ? 0o644 : nil)
        })
        return RemoteFile(fs: self, handle: handle, path: path)
    }

    /// Entries of a directory (without `.` and `..`). A name that is not UTF-8 is not repaired
    /// (U+FFFD would name another entry, or none): it goes to `notUTF8` (its bytes shown as
    /// `\xNN`) and is left out.
    ///
    /// Every name the server sends (kept or not) and every reply (an empty one too) counts
    /// against `bounds`: a server may answer READDIR without end, with names this leaves out
    /// as well as with ones it keeps.
    func list(_ path: String, bounds: inout ListingBounds, notUTF8: (String) -> Void = { _ in })
        throws(StepError) -> [(name: String, attributes: Attributes)]
    {
        let handle = try self.handle("open directory \(path)", try channel.call(.opendir, step) { $0.string(path) })
        defer { closeQuietly(handle) }
        var entries: [(String, Attributes)] = []
        while true {
            var reply = try channel.call(.readdir, step) { $0.string(handle) }
            if reply.type == SFTP.Packet.status.rawValue {
                let (code, message) = try RemoteFS.status(&reply)
                if code == SFTP.Status.eof { return entries }
                throw SFTPStatus.error("read directory \(path)", status: code, message: message)
            }
            guard reply.type == SFTP.Packet.name.rawValue else { throw WireReader.malformed }
            var counted = 0  // the names but `.` and `..`, those left out too
            for _ in 0 ..< (try reply.reader.u32()) {
                let raw = try reply.reader.data()
                _ = try reply.reader.stringRange()  // the `ls -l` line
                let attributes = try reply.reader.attributes()
                if raw == Array(".".utf8) || raw == Array("..".utf8) { continue }
                counted += 1
                guard let name = String(validating: raw, as: UTF8.self) else {
                    notUTF8(PathBytes.shown(raw))
                    continue
                }
                entries.append((name, attributes))
            }
            // A reply counts as one at least: a server answering with empty ones, or with only
            // `.` and `..`, without end, comes to the bound too.
            try bounds.count(max(1, counted), in: path)
        }
    }

    /// Sends CLOSE for `handle` without waiting for the reply (error paths, abandoned files): the
    /// reply is matched to a request nobody waits for, and dropped.
    func closeQuietly(_ handle: [UInt8]) {
        _ = try? channel.send(.close) { $0.string(handle) }
    }

    // MARK: - Replies

    static func status(_ reply: inout SFTPChannel.Reply) throws(StepError) -> (UInt32, String) {
        let code = try reply.reader.u32()
        let message = reply.reader.atEnd ? "" : try reply.reader.string()
        return (code, message)
    }

    /// Checks that `reply` is an OK status.
    func expectOK(_ what: String, _ reply: SFTPChannel.Reply) throws(StepError) {
        var reply = reply
        guard reply.type == SFTP.Packet.status.rawValue else { throw WireReader.malformed }
        let (code, message) = try RemoteFS.status(&reply)
        if code != SFTP.Status.ok { throw SFTPStatus.error(what, status: code, message: message) }
    }

    private func handle(_ what: String, _ reply: SFTPChannel.Reply) throws(StepError) -> [UInt8] {
        var reply = reply
        if reply.type == SFTP.Packet.status.rawValue {
            let (code, message) = try RemoteFS.status(&reply)
            throw SFTPStatus.error(what, status: code, message: message)
        }
        guard reply.type == SFTP.Packet.handle.rawValue else { throw WireReader.malformed }
        return try reply.reader.data()
    }
}

/// An open remote file. Writes and reads are pipelined: up to `window` bytes of requests are in
/// flight at once, each at most the server's request size, so the link stays full whatever its
/// round-trip time.
final class RemoteFile {
    let fs: RemoteFS
    let handle: [UInt8]
    let path: String
    private var open = true
    /// Set once CLOSE is on its way: no request may name this handle after it, since the server
    /// hands the same handle string to the next file opened on the connection.
    private var closeSent = false
    private var channel: SFTPChannel { fs.connection.channel }

    /// Writes sent and not yet acknowledged, oldest first (OpenSSH answers in order).
    private var writes: [(request: SFTPChannel.Request, end: Int64, size: Int)] = []
    private var bytesInFlight = 0
    /// Every byte below this offset is acknowledged by the server.
    private(set) var confirmed: Int64 = 0

    init(fs: RemoteFS, handle: [UInt8], path: String) {
        self.fs = fs
        self.handle = handle
        self.path = path
    }

    // MARK: - Writing

    /// Sends `count` bytes of `source` from `offset` to be written at the same offset (after
    /// earlier writes: offsets only grow), each piece read from the file straight into its WRITE
    /// request. Returns once they are queued, first waiting for acknowledgements while more than
    /// `window` bytes are unacknowledged. A source that ends early is `source_changed`.
    func write(from source: LocalFile, at offset: Int64, count: Int, window: Int) throws(StepError) {
        if writes.isEmpty { confirmed = offset }
        let piece = fs.connection.maximumWrite
        var done = 0
        while done < count {
            let size = min(piece, count - done)
            while bytesInFlight > 0 && bytesInFlight + size > window { try awaitWrites(freeing: max(window / 2, size)) }
            let at = offset + Int64(done)
            let request = try channel.send(.write, capacity: size + handle.count + 16) { writer throws(StepError) in
                writer.string(handle)
                writer.u64(UInt64(at))
                try writer.string(length: size) { buffer throws(StepError) in
                    var filled = 0
                    while filled < size {
                        let n = try source.read(into: UnsafeMutableRawBufferPointer(rebasing: buffer[filled...]), at: at + Int64(filled))
                        if n == 0 { throw .retryable("\(source.path) shrank while it was being uploaded", code: "source_changed") }
                        filled += n
                    }
                }
            }
            writes.append((request, at + Int64(size), size))
            bytesInFlight += size
            done += size
        }
    }

    /// Waits until every write sent so far is acknowledged.
    func flush() throws(StepError) {
        if !writes.isEmpty { try awaitWrites(freeing: .max) }
    }

    /// Waits until the oldest writes holding at least `bytes` of the window are acknowledged.
    /// Waiting for the last of them first (OpenSSH answers in order, so the others are in by
    /// then) wakes this thread once for all of them, not once per write.
    private func awaitWrites(freeing bytes: Int) throws(StepError) {
        var last = 0, freed = writes[0].size
        while freed < bytes && last + 1 < writes.count {
            last += 1
            freed += writes[last].size
        }
        do {
            _ = try channel.wait(writes[last].request, fs.step)
        } catch {
            abandonWrites()  // cancelled, or the connection is gone
            throw error
        }
        for _ in 0 ... last { try awaitOldestWrite() }
    }

    private func awaitOldestWrite() throws(StepError) {
        let (request, end, size) = writes[0]
        do {
            try fs.expectOK("write \(path)", try channel.wait(request, fs.step))
        } catch {
            abandonWrites()
            // The server refused a write (no space…) but may have taken later ones, already
            // sent: cut the file back to what is known good, so a resume from its size leaves
            // no hole. (It applies requests in order, so this comes after them.)
            if error.code != "connection_lost" && error.kind != .cancelled && !closeSent {
                let good = confirmed
                _ = try? channel.send(.fsetstat) { $0.string(handle); $0.u32(0x1); $0.u64(UInt64(good)) }
            }
            throw error
        }
        writes.removeFirst()  // at most window / piece entries
        bytesInFlight -= size
        confirmed = end
    }

    private func abandonWrites() {
        for (request, _, _) in writes { channel.abandon(request) }
        writes.removeAll()
        bytesInFlight = 0
    }

    // MARK: - Reading

    /// Reads `[from, to)` into `sink` at the same offsets, with up to `window` bytes of READ
    /// requests in flight beyond what `progress` has returned from; the channel's I/O thread asks
    /// for each piece and writes its data to `sink` as it arrives (`ReadStream`). Calls
    /// `progress(end)` as the bytes below `end` are written in order, every half window. A file
    /// that ends before `to` is `source_changed`.
    func read(from: Int64, to: Int64, window: Int, into sink: any ReadSink,
              progress: (Int64) throws(StepError) -> Void) throws(StepError)
    {
        guard from < to else { return }
        let stream = try channel.stream(handle, from: from, to: to, window: window, piece: fs.connection.maximumRead, into: sink)
        // Abandoning waits for a sink write in progress: none lands after this returns.
        defer { channel.abandon(stream) }
        var position = from
        while position < to {
            let (end, refusal) = try channel.advance(stream, released: position, fs.step)
            if end > position {
                position = end
                try progress(end)
            }
            if var reply = refusal {
                if reply.type == SFTP.Packet.status.rawValue {
                    let (code, message) = try RemoteFS.status(&reply)
                    if code == SFTP.Status.eof {
                        throw .retryable("\(path) shrank while it was being downloaded", code: "source_changed")
                    }
                    throw SFTPStatus.error("read \(path)", status: code, message: message)
                }
                guard reply.type == SFTP.Packet.data.rawValue else { throw WireReader.malformed }
                if let error = reply.sinkError { throw error }
                throw .retryable("\(path) shrank while it was being downloaded", code: "source_changed")  // no data
            }
        }
    }

    // MARK: - Closing

    /// fsync@openssh.com where the server has it; ignored where it does not.
    func sync() throws(StepError) {
        guard fs.connection.supports("fsync@openssh.com") else { return }
        try fs.expectOK("fsync \(path)", try channel.call(.extended, fs.step) { $0.string("fsync@openssh.com"); $0.string(handle) })
    }

    func close() throws(StepError) {
        guard open else { return }
        open = false
        try flushOrCloseQuietly()
        closeSent = true
        try fs.expectOK("close \(path)", try channel.call(.close, fs.step) { $0.string(handle) })
    }

    /// Waits for the writes in flight; if one was refused, the handle is closed without waiting
    /// for the answer and the refusal thrown.
    private func flushOrCloseQuietly() throws(StepError) {
        do {
            try flush()
        } catch {
            closeSent = true
            fs.closeQuietly(handle)
            throw error
        }
    }

    /// Ends an upload: the file's times set (`times`, when given: FSETSTAT on this handle), its
    /// data fsynced (fsync@openssh.com where the server has it), the handle closed. The three go
    /// out at once, behind the write in flight, in one round trip instead of one each: a server
    /// applies the requests on one handle in the order they came (OpenSSH's sftp-server serves
    /// one request after another). With more than one write in flight, those are waited for
    /// first: a refused write is cut back to what was acknowledged before the handle closes, and
    /// a later write that landed would leave a hole below it; one write alone leaves none.
    /// Every reply is checked (the writes', then the fsync's and the close's) before this
    /// returns, so the caller renames only a file whose every byte the server wrote and synced.
    /// Returns why the server refused the times (nil: set), which is not worth the upload.
    func finish(times: (accessed: Int64, modified: Int64)?) throws(StepError) -> StepError? {
        guard open else { return nil }
        open = false
        if writes.count > 1 { try flushOrCloseQuietly() }
        var tail: [(what: String, request: SFTPChannel.Request)] = []
        do {
            if let times {
                tail.append(("setstat", try channel.send(.fsetstat) {
                    $0.string(handle); $0.attributes(accessed: times.accessed, modified: times.modified)
                }))
            }
            if fs.connection.supports("fsync@openssh.com") {
                tail.append(("fsync", try channel.send(.extended) { $0.string("fsync@openssh.com"); $0.string(handle) }))
            }
            closeSent = true
            tail.append(("close", try channel.send(.close) { $0.string(handle) }))
        } catch {
            for (_, request) in tail { channel.abandon(request) }
            abandonWrites()
            fs.closeQuietly(handle)
            throw error
        }
        var failure: StepError?
        do { try flush() } catch { failure = error }
        var timesRefused: StepError?
        for (what, request) in tail {
            if failure?.kind == .cancelled || failure?.code == "connection_lost" {
                channel.abandon(request)
                continue
            }
            do {
                try fs.expectOK("\(what) \(path)", try channel.wait(request, fs.step))
            } catch {
                if what == "setstat" && error.code != "connection_lost" && error.kind != .cancelled {
                    timesRefused = error
                } else if failure == nil {
                    failure = error
                }
            }
        }
        if let failure { throw failure }
        return timesRefused
    }

    deinit {
        if open {
            abandonWrites()
            fs.closeQuietly(handle)
        }
    }
}
