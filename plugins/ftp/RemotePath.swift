import OrchestrateExactPath
import OrchestratePluginKit

/// Remote paths confined to `remote_root`, lexically: `..` that would climb above the root is
/// refused, and no component may hold a control character (CR or LF would end an FTP command
/// and start another). Every remote path the plugin uses is `root + relative components`.
///
/// FTP gives no way to ask the server for a path's real location, so a symlink on the server
/// that points out of the root cannot be detected in general: the tree walk skips entries whose
/// MLSD `type=` fact (or LIST mode) says link, and that is all that can be done.
struct RemoteRoot {
    /// The root's components; `absolute`: from the server's `/`, else from the login directory.
    let components: [String]
    let absolute: Bool

    init(_ configured: String) throws(StepError) {
        absolute = configured.hasPrefix("/")
        guard let normal = RemoteRoot.normalise(configured) else {
            throw .invalidInput("remote_root \(configured) climbs above its start", code: "path_escape")
        }
        try RemoteRoot.checkComponents(normal, in: configured)
        components = normal
    }

    /// `relative` (a path under the root) as normalised components; an error if it escapes.
    func relative(_ relative: String) throws(StepError) -> [String] {
        guard let normal = RemoteRoot.normalise(relative) else {
            throw .invalidInput("remote path \(relative) escapes remote_root", code: "path_escape")
        }
        try RemoteRoot.checkComponents(normal, in: relative)
        return normal
    }

    /// The path of `relative` components under the root, for messages and outputs.
    func display(_ relative: [String]) -> String {
        let all = components + relative
        return (absolute ? "/" : "") + all.joined(separator: "/")
    }

    /// The URL of a file (or, with `directory`, a folder) under the root: every component
    /// percent-encoded; an absolute root starts with `%2F` so that libcurl's first CWD is `/`.
    func url(_ origin: String, _ relative: [String], directory: Bool = false) -> String {
        let all = components + relative
        var path = (absolute ? "/%2F" : "/") + all.map(RemoteRoot.encode).joined(separator: "/")
        if directory && !all.isEmpty { path += "/" }
        return origin + path
    }

    private static func normalise(_ path: String) -> [String]? {
        var out: [String] = []
        for part in PathBytes.components(path, omittingEmpty: true) {  // by bytes: see PathBytes
            if part.utf8.elementsEqual(".".utf8) { continue }
            if part.utf8.elementsEqual("..".utf8) {
                if out.isEmpty { return nil }
                out.removeLast()
            } else {
                out.append(part)
            }
        }
        return out
    }

    private static func checkComponents(_ parts: [String], in path: String) throws(StepError) {
        for part in parts where !RemoteName.isSafe(part) {
            throw .invalidInput("remote path \(path) holds a control character", code: "bad_remote_name")
        }
    }

    /// RFC 3986 percent-encoding of everything but the unreserved characters.
    static func encode(_ component: String) -> String {
        var out = ""
        for byte in component.utf8 {
            switch byte {
            case UInt8(ascii: "a") ... UInt8(ascii: "z"), UInt8(ascii: "A") ... UInt8(ascii: "Z"), UInt8(ascii: "0") ... UInt8(ascii: "9"),
                 UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: "_"), UInt8(ascii: "~"):
                out.unicodeScalars.append(Unicode.Scalar(byte))
            default:
                let hex = Array("0123456789ABCDEF")
                out += "%" + String(hex[Int(byte >> 4)]) + String(hex[Int(byte & 15)])
            }
        }
        return out
    }
}

/// Names that come from a server's listing and become local paths, or go into FTP commands.
enum RemoteName {
    /// No control character (NUL, CR, LF, DEL and the rest below space).
    static func isSafe(_ name: String) -> Bool {
        !name.unicodeScalars.contains { $0.value < 32 || $0.value == 127 }
    }

    /// A listed entry's name usable as one local path component inside the destination folder:
    /// not empty, `.` or `..`, no `/` (nor `\`), no control character.
    static func isSafeEntry(_ name: String) -> Bool { PathBytes.isSafeListedName(name) }
}
