import OrchestratePluginKit

/// The SFTP version 3 wire format (draft-ietf-secsh-filexfer-02, the version OpenSSH speaks),
/// plus the OpenSSH extensions the plugin uses. We speak SFTP ourselves over a libssh2 channel
/// instead of calling libssh2's SFTP layer: libssh2 1.10 keeps one pending state per operation
/// kind on the shared SFTP object, so several transfers cannot share its SFTP session, and we
/// want posix-rename, limits and large pipelined requests, which its SFTP layer lacks.
enum SFTP {
    enum Packet: UInt8 {
        case initialise = 1, version = 2, open = 3, close = 4, read = 5, write = 6, lstat = 7, fstat = 8, setstat = 9, fsetstat = 10
        case opendir = 11, readdir = 12, remove = 13, mkdir = 14, realpath = 16, stat = 17, rename = 18
        case status = 101, handle = 102, data = 103, name = 104, attributes = 105
        case extended = 200, extendedReply = 201
    }

    /// `SSH_FXF_*` open flags.
    struct OpenFlags: OptionSet {
        let rawValue: UInt32
        static let read = OpenFlags(rawValue: 0x01)
        static let write = OpenFlags(rawValue: 0x02)
        static let create = OpenFlags(rawValue: 0x08)
        static let truncate = OpenFlags(rawValue: 0x10)
        /// With `create`: fail if the name exists, a symlink included (never followed: O_EXCL).
        static let exclusive = OpenFlags(rawValue: 0x20)
    }

    /// `SSH_FX_*` status codes (4 and above are v4+ codes some servers send anyway).
    enum Status {
        static let ok: UInt32 = 0, eof: UInt32 = 1, noSuchFile: UInt32 = 2, permissionDenied: UInt32 = 3
        static let failure: UInt32 = 4, connectionLost: UInt32 = 7, unsupported: UInt32 = 8
        static let noSuchPath: UInt32 = 10, fileAlreadyExists: UInt32 = 11, writeProtect: UInt32 = 12
        static let noSpace: UInt32 = 14, quotaExceeded: UInt32 = 15
    }

    /// The part of a file's attributes the steps use.
    struct Attributes {
        var size: Int64
        var permissions: UInt32?
        /// Seconds since the epoch (v3 carries whole seconds), when the server sent it.
        var mtime: Int64?
        var isDirectory: Bool { permissions.map { $0 & 0o170000 == 0o040000 } ?? false }
        var isRegular: Bool { permissions.map { $0 & 0o170000 == 0o100000 } ?? true }
        /// Only an `lstat` (or a directory listing) can say so: `stat` follows the link.
        var isSymlink: Bool { permissions.map { $0 & 0o170000 == 0o120000 } ?? false }
    }

    /// The largest packet we accept from a server (OpenSSH's own limit is 256 KiB).
    static let maximumPacket = 4 << 20
}

/// Builds one outgoing packet: `uint32 length, byte type, [uint32 id], payload`.
struct WireWriter {
    /// The packet so far; a reused buffer may be longer than what was written (`count`) until
    /// `finish` cuts it.
    private var bytes: [UInt8]
    private var count = 0

    /// `buffer`: a spare packet to write into (its capacity and length are kept), so big packets
    /// cost neither a fresh allocation and its page faults nor zeroing before they are filled.
    init(_ type: SFTP.Packet, id: UInt32?, capacity: Int = 64, reusing buffer: [UInt8] = []) {
        bytes = buffer
        bytes.reserveCapacity(capacity + 13)
        u32(0)  // the length, set by finish
        put(CollectionOfOne(type.rawValue))
        if let id { u32(id) }
    }

    mutating func u32(_ v: UInt32) { put([UInt8(v >> 24), UInt8(v >> 16 & 0xff), UInt8(v >> 8 & 0xff), UInt8(v & 0xff)]) }
    mutating func u64(_ v: UInt64) { u32(UInt32(v >> 32)); u32(UInt32(v & 0xffff_ffff)) }
    mutating func string(_ s: String) { u32(UInt32(s.utf8.count)); put(s.utf8) }
    mutating func string(_ b: [UInt8]) { u32(UInt32(b.count)); put(b) }
    mutating func string(_ b: UnsafeRawBufferPointer) { u32(UInt32(b.count)); put(b) }

    /// A string of `length` bytes that `fill` writes in place (a file read straight into the
    /// packet: no buffer in between, no second copy).
    mutating func string(length: Int, _ fill: (UnsafeMutableRawBufferPointer) throws(StepError) -> Void) throws(StepError) {
        u32(UInt32(length))
        if bytes.count < count + length { bytes += repeatElement(0, count: count + length - bytes.count) }
        let start = count
        try bytes.withUnsafeMutableBytes { raw in
            Result { () throws(StepError) in try fill(UnsafeMutableRawBufferPointer(rebasing: raw[start ..< start + length])) }
        }.get()
        count += length
    }

    /// Attributes with only the permissions set (for mkdir and file creation), or none.
    mutating func attributes(permissions: UInt32?) {
        if let permissions { u32(0x4); u32(permissions) } else { u32(0) }
    }

    /// Attributes with only the access and modification times set (SETSTAT: `touch -d`).
    mutating func attributes(accessed: Int64, modified: Int64) {
        u32(0x8); u32(UInt32(truncatingIfNeeded: accessed)); u32(UInt32(truncatingIfNeeded: modified))
    }

    /// The finished packet, its length field filled in.
    mutating func finish() -> [UInt8] {
        if bytes.count > count { bytes.removeLast(bytes.count - count) }
        let length = UInt32(count - 4)
        bytes[0] = UInt8(length >> 24); bytes[1] = UInt8(length >> 16 & 0xff); bytes[2] = UInt8(length >> 8 & 0xff); bytes[3] = UInt8(length & 0xff)
        return bytes
    }

    /// Writes `source` at `count`: over a reused buffer's old bytes, and past its end.
    private mutating func put<C: Collection>(_ source: C) where C.Element == UInt8 {
        let start = count, length = source.count
        if bytes.count < start + length { bytes += repeatElement(0, count: start + length - bytes.count) }
        bytes.withUnsafeMutableBufferPointer { buffer in
            _ = UnsafeMutableBufferPointer(rebasing: buffer[start ..< start + length]).initialize(from: source)
        }
        count += length
    }
}

/// Reads the fields of one incoming packet body; running past its end is a protocol error.
struct WireReader {
    let bytes: [UInt8]
    private(set) var position: Int

    init(_ bytes: [UInt8]) {
        self.bytes = bytes
        position = 0
    }

    var atEnd: Bool { position >= bytes.count }

    mutating func u32() throws(StepError) -> UInt32 {
        guard position + 4 <= bytes.count else { throw WireReader.malformed }
        defer { position += 4 }
        return UInt32(bytes[position]) << 24 | UInt32(bytes[position + 1]) << 16 | UInt32(bytes[position + 2]) << 8 | UInt32(bytes[position + 3])
    }

    mutating func u64() throws(StepError) -> UInt64 { UInt64(try u32()) << 32 | UInt64(try u32()) }

    /// A string's bytes as a range of `bytes` (no copy).
    mutating func stringRange() throws(StepError) -> Range<Int> {
        let count = Int(try u32())
        guard count <= bytes.count - position else { throw WireReader.malformed }
        defer { position += count }
        return position ..< position + count
    }

    mutating func data() throws(StepError) -> [UInt8] { Array(bytes[try stringRange()]) }
    mutating func string() throws(StepError) -> String { String(decoding: bytes[try stringRange()], as: UTF8.self) }

    mutating func attributes() throws(StepError) -> SFTP.Attributes {
        let flags = try u32()
        var attributes = SFTP.Attributes(size: 0, permissions: nil)
        if flags & 0x1 != 0 { attributes.size = Int64(bitPattern: try u64()) }
        if flags & 0x2 != 0 { _ = try u32(); _ = try u32() }
        if flags & 0x4 != 0 { attributes.permissions = try u32() }
        if flags & 0x8 != 0 {
            _ = try u32()
            attributes.mtime = Int64(try u32())
        }
        if flags & 0x8000_0000 != 0 {
            for _ in 0 ..< (try u32()) { _ = try stringRange(); _ = try stringRange() }
        }
        return attributes
    }

    static let malformed = StepError.retryable("the server sent a malformed SFTP packet", code: "sftp_protocol")
}
