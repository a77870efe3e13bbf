import CLibSSH2
import OrchestratePluginKit

/// The SFTP file operations the steps need, on one connection, each a non-blocking libssh2 call
/// driven by `Connection.call`.
struct RemoteFS {
    let connection: Connection
    private var sftp: OpaquePointer { connection.sftp }

    struct Attributes {
        var size: Int64
        var isDirectory: Bool
        var isRegular: Bool
    }

    /// Attributes of `path` (following symlinks), or nil when it does not exist.
    func stat(_ path: String) throws(StepError) -> Attributes? {
        var attrs = LIBSSH2_SFTP_ATTRIBUTES()
        do {
            try connection.call("stat \(path)") {
                libssh2_sftp_stat_ex(sftp, path, UInt32(path.utf8.count), LIBSSH2_SFTP_STAT, &attrs)
            }
        } catch where error.code == "ENOENT" {
            return nil
        }
        let type = attrs.permissions & UInt(LIBSSH2_SFTP_S_IFMT)
        return Attributes(size: Int64(attrs.filesize), isDirectory: type == UInt(LIBSSH2_SFTP_S_IFDIR),
                          isRegular: type == UInt(LIBSSH2_SFTP_S_IFREG))
    }

    /// `mkdir -p`: creates each missing component of the absolute `path`.
    func makeDirectories(_ path: String) throws(StepError) {
        var current = ""
        for component in path.split(separator: "/") {
            current += "/" + component
            if let existing = try stat(current) {
                guard existing.isDirectory else { throw .permanent("\(current) exists and is not a directory", code: "ENOTDIR") }
                continue
            }
            let dir = current
            do {
                try connection.call("mkdir \(dir)") { libssh2_sftp_mkdir_ex(sftp, dir, UInt32(dir.utf8.count), 0o755) }
            } catch {
                // Another transfer may have created it meanwhile.
                if try stat(dir)?.isDirectory != true { throw error }
            }
        }
    }

    /// Renames `from` over `to`. SFTP v3 servers (OpenSSH) refuse to rename onto an existing
    /// file, and Debian's libssh2 1.10 cannot send OpenSSH's posix-rename@openssh.com (1.11 can).
    /// So an existing target is first renamed aside (`NAME.orchestrate-replaced`), the new file
    /// renamed into place, then the old one removed: the old bytes exist until the new ones are
    /// in place, and go back if the second rename fails. Only the name is briefly absent.
    func rename(_ from: String, to: String) throws(StepError) {
        do {
            try plainRename(from, to)
        } catch where error.kind == .permanent {
            guard try stat(to) != nil else { throw error }
            let aside = to + ".orchestrate-replaced"
            if try stat(aside) != nil { try remove(aside) }  // left by a crash inside this window
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
        let flags = Int(LIBSSH2_SFTP_RENAME_OVERWRITE | LIBSSH2_SFTP_RENAME_ATOMIC | LIBSSH2_SFTP_RENAME_NATIVE)
        try connection.call("rename \(from)") {
            libssh2_sftp_rename_ex(sftp, from, UInt32(from.utf8.count), to, UInt32(to.utf8.count), flags)
        }
    }

    func remove(_ path: String) throws(StepError) {
        try connection.call("remove \(path)") { libssh2_sftp_unlink_ex(sftp, path, UInt32(path.utf8.count)) }
    }

    /// The server's canonical form of `path` (symlinks resolved).
    func realpath(_ path: String) throws(StepError) -> String {
        var buffer = [CChar](repeating: 0, count: 4097)
        let n = try connection.call("realpath \(path)") {
            libssh2_sftp_symlink_ex(sftp, path, UInt32(path.utf8.count), &buffer, UInt32(buffer.count - 1), LIBSSH2_SFTP_REALPATH)
        }
        return String(decoding: buffer.prefix(Int(n)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
    }

    /// Opens `path` for reading, or for writing (created if missing, never truncated, never APPEND:
    /// writes go to explicit offsets so a resume can start anywhere).
    func open(_ path: String, write: Bool, truncate: Bool = false) throws(StepError) -> RemoteFile {
        var flags = write ? UInt(LIBSSH2_FXF_WRITE | LIBSSH2_FXF_CREAT) : UInt(LIBSSH2_FXF_READ)
        if truncate { flags |= UInt(LIBSSH2_FXF_TRUNC) }
        let handle = try connection.pointer("open \(path)") {
            libssh2_sftp_open_ex(sftp, path, UInt32(path.utf8.count), flags, 0o644, LIBSSH2_SFTP_OPENFILE)
        }
        return RemoteFile(connection: connection, handle: handle, path: path)
    }

    /// Entries of a directory (without `.` and `..`).
    func list(_ path: String) throws(StepError) -> [(name: String, attributes: Attributes)] {
        let handle = try connection.pointer("open directory \(path)") {
            libssh2_sftp_open_ex(sftp, path, UInt32(path.utf8.count), 0, 0, LIBSSH2_SFTP_OPENDIR)
        }
        defer { _ = try? connection.call("close \(path)") { libssh2_sftp_close_handle(handle) } }
        var entries: [(String, Attributes)] = []
        var buffer = [CChar](repeating: 0, count: 4097)
        while true {
            var attrs = LIBSSH2_SFTP_ATTRIBUTES()
            let n = try connection.call("read directory \(path)") {
                libssh2_sftp_readdir_ex(handle, &buffer, buffer.count - 1, nil, 0, &attrs)
            }
            if n == 0 { break }
            let name = String(decoding: buffer.prefix(Int(n)).map { UInt8(bitPattern: $0) }, as: UTF8.self)
            if name == "." || name == ".." { continue }
            let type = attrs.permissions & UInt(LIBSSH2_SFTP_S_IFMT)
            entries.append((name, Attributes(size: Int64(attrs.filesize), isDirectory: type == UInt(LIBSSH2_SFTP_S_IFDIR),
                                             isRegular: type == UInt(LIBSSH2_SFTP_S_IFREG))))
        }
        return entries
    }
}

/// An open remote file. Large `write`/`read` buffers are what makes libssh2 pipeline: it splits
/// a write into ~30 KB SFTP requests all sent before the first acknowledgement, and reads ahead
/// in proportion to the buffer asked for.
final class RemoteFile {
    let connection: Connection
    let handle: OpaquePointer
    let path: String
    private var open = true

    init(connection: Connection, handle: OpaquePointer, path: String) {
        self.connection = connection
        self.handle = handle
        self.path = path
    }

    func seek(_ offset: Int64) { libssh2_sftp_seek64(handle, UInt64(offset)) }

    /// Writes all of `bytes` at the current offset.
    func write(_ bytes: UnsafeRawBufferPointer) throws(StepError) {
        var done = 0
        while done < bytes.count {
            let base = bytes.baseAddress!.advanced(by: done).assumingMemoryBound(to: CChar.self)
            let remaining = bytes.count - done
            done += try connection.call("write \(path)") { libssh2_sftp_write(handle, base, remaining) }
        }
    }

    /// Reads up to `buffer.count` bytes at the current offset; 0 at end of file.
    func read(into buffer: UnsafeMutableRawBufferPointer) throws(StepError) -> Int {
        let base = buffer.baseAddress!.assumingMemoryBound(to: CChar.self)
        let count = buffer.count
        return try connection.call("read \(path)") { libssh2_sftp_read(handle, base, count) }
    }

    /// fsync@openssh.com where the server has it; ignored where it does not.
    func sync() {
        _ = try? connection.call("fsync \(path)") { libssh2_sftp_fsync(handle) }
    }

    func close() throws(StepError) {
        guard open else { return }
        open = false
        try connection.call("close \(path)") { libssh2_sftp_close_handle(handle) }
    }

    deinit {
        if open && !connection.broken { _ = try? close() }
    }
}
