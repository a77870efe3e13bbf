import Foundation

/// Refuses state another user could have planted or can change, as OpenSSH refuses loose key
/// files: a state directory, store file or token file is used only when it belongs to the
/// current user and nobody else can write it (a token file: nor read it). Otherwise a directory
/// made beforehand by another user, with their token in it, would drive a `serve` running as
/// root, and that user's `exec` steps would run as root.
///
/// Write access for root's group (gid 0) is accepted: its members are root already.
///
/// ```swift
/// try OwnedState.check(directory, as: .stateDirectory)   // throws OwnedState.Refusal
/// ```
public enum OwnedState {
    public enum Kind: Sendable {
        case stateDirectory, storeFile, tokenFile
        /// The user's remotes file: connections and where their secrets come from.
        case remotesFile

        var name: String {
            switch self {
            case .stateDirectory: "state directory"
            case .storeFile: "store file"
            case .tokenFile: "token file"
            case .remotesFile: "remotes file"
            }
        }

        /// Private to its owner: no group or other permission at all, reading included.
        var isPrivate: Bool { self == .tokenFile || self == .remotesFile }
    }

    public struct Refusal: Error, CustomStringConvertible, Sendable {
        public let description: String
    }

    /// Checks `path` (symlinks followed: what is checked is what is used); a missing path is
    /// accepted (it is made by this user, with a private mode).
    public static func check(_ path: String, as kind: Kind) throws(Refusal) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            if errno == ENOENT { return }
            throw Refusal(description: "the \(kind.name) \(path) cannot be examined: \(String(cString: strerror(errno)))")
        }
        try check(info, path: path, as: kind)
    }

    /// Checks an open file (`fstat`), so what is checked is what was opened.
    public static func check(descriptor: Int32, path: String, as kind: Kind) throws(Refusal) {
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw Refusal(description: "the \(kind.name) \(path) cannot be examined: \(String(cString: strerror(errno)))")
        }
        try check(info, path: path, as: kind)
    }

    /// The bytes of the file `path` (nil when it is missing), checked on the open descriptor, so
    /// a file swapped in after a check is not what gets read. Refused: anything but a regular
    /// file (a FIFO planted under the name does not hang the open), a file that fails `check`,
    /// or one larger than `atMost` bytes.
    public static func read(_ path: String, as kind: Kind, atMost: Int) throws(Refusal) -> Data? {
        let handle: FileHandle
        switch RegularFile.open(path) {
        case .success(let opened): handle = opened
        case .failure(.missing): return nil
        case .failure(.refused(let why)): throw Refusal(description: "orchestrate refuses the \(kind.name) \(path): it \(why)")
        }
        try check(descriptor: handle.fileDescriptor, path: path, as: kind)
        let data: Data
        do {
            data = try RegularFile.read(handle, atMost: atMost)
        } catch {
            throw Refusal(description: "cannot read the \(kind.name) \(path): \(error.localizedDescription)")
        }
        guard data.count <= atMost else {
            throw Refusal(description: "orchestrate refuses the \(kind.name) \(path): it is larger than \(atMost >= 1 << 20 ? "\(atMost >> 20) MiB" : "\(atMost >> 10) KiB")")
        }
        return data
    }

    private static func check(_ info: stat, path: String, as kind: Kind) throws(Refusal) {
        let me = geteuid()
        let refused = "orchestrate refuses the \(kind.name) \(path)"
        if info.st_uid != me {
            throw Refusal(description: "\(refused): it belongs to \(userName(info.st_uid)), not to the current user \(userName(me)), "
                + "so that user could have planted it or can change it; use one of your own, or fix with chown \(me) \(path)")
        }
        let exact = kind == .stateDirectory ? "700" : "600"
        if kind.isPrivate && info.st_mode & 0o077 != 0 {
            throw Refusal(description: "\(refused): it is readable or writable by others (mode \(mode(info))); "
                + "\(kind == .tokenFile ? "a token" : "it") must be private to its owner: fix with chmod \(exact) \(path)")
        }
        if info.st_mode & S_IWOTH != 0 {
            throw Refusal(description: "\(refused): it is writable by every user (mode \(mode(info))); fix with chmod \(exact) \(path)")
        }
        if info.st_mode & S_IWGRP != 0 && info.st_gid != 0 {
            throw Refusal(description: "\(refused): it is writable by group \(groupName(info.st_gid)) (mode \(mode(info))); "
                + "fix with chmod \(exact) \(path)")
        }
    }

    private static func mode(_ info: stat) -> String { String(info.st_mode & 0o7777, radix: 8) }

    private static func userName(_ uid: uid_t) -> String {
        guard let entry = getpwuid(uid) else { return "uid \(uid)" }
        return "\(String(cString: entry.pointee.pw_name)) (uid \(uid))"
    }

    private static func groupName(_ gid: gid_t) -> String {
        guard let entry = getgrgid(gid) else { return "gid \(gid)" }
        return "\(String(cString: entry.pointee.gr_name)) (gid \(gid))"
    }
}
