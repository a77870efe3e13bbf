// A secret kept in a file (`secrets: { key: { file: /run/secrets/key } }`, a remote's
// `{ file: PATH }`): read at every attempt, like an environment variable, never stored.
import Foundation
import OrchestrateStore

enum SecretFile {
    struct Problem: Error, CustomStringConvertible {
        let description: String
    }

    /// A secret is a line or a key, not a document.
    static let maximumSize = 64 << 10

    /// The file's text without its final line break. Refused: a file another user could have
    /// written (not the user's nor root's, or writable by others or by a group other than
    /// root's): whoever can change it chooses the credentials a transfer logs in with.
    static func read(_ path: String, environment: [String: String]) -> Result<String, Problem> {
        let expanded = path.hasPrefix("~/") ? (environment["HOME"] ?? NSHomeDirectory()) + path.dropFirst(1) : path
        let handle: FileHandle
        switch RegularFile.open(expanded) {
        case .success(let opened): handle = opened
        case .failure(.missing): return .failure(Problem(description: "does not exist"))
        case .failure(.refused(let why)): return .failure(Problem(description: why))
        }
        var info = stat()
        guard fstat(handle.fileDescriptor, &info) == 0 else { return .failure(Problem(description: "cannot be examined")) }
        if info.st_uid != geteuid() && info.st_uid != 0 {
            return .failure(Problem(description: "belongs to another user (uid \(info.st_uid)), who could have planted it; "
                + "use a file of your own"))
        }
        if info.st_mode & S_IWOTH != 0 || (info.st_mode & S_IWGRP != 0 && info.st_gid != 0) {
            return .failure(Problem(description: "others can write to (mode \(String(info.st_mode & 0o777, radix: 8))); "
                + "fix with chmod 600 \(expanded)"))
        }
        guard let data = try? RegularFile.read(handle, atMost: maximumSize) else {
            return .failure(Problem(description: "cannot be read"))
        }
        guard data.count <= maximumSize else { return .failure(Problem(description: "is larger than 64 KiB")) }
        var text = String(decoding: data, as: UTF8.self)
        if text.last == "\n" || text.last == "\r\n" { text.removeLast() }  // "\r\n" is one Character
        guard !text.isEmpty else { return .failure(Problem(description: "is empty")) }
        return .success(text)
    }
}
