import Foundation
import OrchestrateJSON
import OrchestrateModel

/// One side of `orchestrate copy SRC DST`: a local path, `REMOTE:path`, or a URL.
///
///     CopyEndpoint.parse("media:masters/a.mov", remotes: catalog)   // .remote(media (s3), "masters/a.mov")
///     CopyEndpoint.parse("s3://bucket/a.mov", remotes: catalog)     // .url(.s3, ["bucket": "bucket"], "a.mov")
///     CopyEndpoint.parse("./renders", remotes: catalog)            // .local("/abs/renders")
enum CopyEndpoint {
    /// A local path, made absolute (a resumed copy may run from another directory).
    case local(String)
    /// A connection: its type, the remote's name (nil for a URL), the connection fields a URL gives,
    /// and the path on the server (a key for S3, relative to remote_root for SFTP and FTP).
    case server(type: RemoteType, remote: String?, fields: [String: JSONValue], path: String, written: String)
    /// An http(s) URL: downloads only.
    case web(url: String)

    struct Refusal: Error { let message: String }

    static func parse(_ text: String, remotes: () -> Result<RemoteCatalog, RemotesUnavailable>) -> Result<CopyEndpoint, Refusal> {
        if text.isEmpty { return .failure(Refusal(message: "an empty path")) }
        if let scheme = scheme(of: text) { return url(text, scheme: scheme) }
        if let colon = text.firstIndex(of: ":"), !text[..<colon].contains("/"), !text.hasPrefix(".") {
            let name = String(text[..<colon])
            let path = String(text[text.index(after: colon)...])
            switch remotes() {
            case .failure(let unavailable):
                return .failure(Refusal(message: "'\(text)' names the remote '\(name)', but the remotes file cannot be used: \(unavailable.reason)"
                    + unavailable.diagnostics.map { "\n\($0)" }.joined()))
            case .success(let catalog):
                guard let remote = catalog[name] else {
                    let hint = closestMatch(to: name, in: catalog.names).map { "; did you mean '\($0):'?" } ?? ""
                    return .failure(Refusal(message: "unknown remote '\(name)' in '\(text)' (remotes: "
                        + (catalog.names.isEmpty ? "none defined" : catalog.names.joined(separator: ", "))
                        + ")\(hint); a local path with a colon is written ./\(text)"))
                }
                if remote.type == .http {
                    return .failure(Refusal(message: "'\(name)' is an http remote: copy downloads from http(s) URLs (https://host/path) and "
                        + "takes http remotes only in workflows"))
                }
                var remotePath = path
                var fields: [String: JSONValue] = [:]
                if remote.type == .s3, remote.field("bucket") == nil {
                    // A remote without a bucket: REMOTE:bucket/key, as rclone writes it.
                    let parts = path.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
                    guard let bucket = parts.first, !bucket.isEmpty else {
                        return .failure(Refusal(message: "'\(text)': the remote '\(name)' names no bucket, so write \(name):BUCKET/KEY"))
                    }
                    fields["bucket"] = .string(String(bucket))
                    remotePath = parts.count > 1 ? String(parts[1]) : ""
                }
                return .success(.server(type: remote.type, remote: name, fields: fields, path: remotePath, written: text))
            }
        }
        let absolute = text.hasPrefix("/") ? text : FileManager.default.currentDirectoryPath + "/" + text
        return .success(.local(absolute))
    }

    private static func scheme(of text: String) -> String? {
        guard let range = text.range(of: "://") else { return nil }
        let scheme = text[..<range.lowerBound]
        guard !scheme.isEmpty, scheme.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "+" || $0 == "-" || $0 == "." }) else { return nil }
        return scheme.lowercased()
    }

    /// What comes between "://" and the first "/", "?" or "#": `[USER[:PASSWORD]@]HOST[:PORT]`.
    private static func authority(of text: String) -> Substring {
        guard let start = text.range(of: "://")?.upperBound else { return "" }
        let rest = text[start...]
        return rest[..<(rest.firstIndex { $0 == "/" || $0 == "?" || $0 == "#" } ?? rest.endIndex)]
    }

    private static let credentialsRefused = ": a command line is visible to every local user, and the run (its inputs, its description) "
        + "is journaled"

    private static func url(_ text: String, scheme: String) -> Result<CopyEndpoint, Refusal> {
        switch scheme {
        case "http", "https":
            if authority(of: text).contains("@") {
                return .failure(Refusal(message: "'\(text)' holds credentials (USER@ or USER:PASSWORD@)" + credentialsRefused
                    + ". Download it with a workflow's http.download step, its credentials from a secret"))
            }
            return .success(.web(url: text))
        case "s3":
            if authority(of: text).contains("@") || authority(of: text).contains(":") {
                return .failure(Refusal(message: "'\(text)': write s3://BUCKET/KEY; keys go in the environment, ~/.aws or a remote, "
                    + "never in the URL" + credentialsRefused))
            }
            let rest = text.dropFirst("s3://".count)
            let parts = rest.split(separator: "/", maxSplits: 1, omittingEmptySubsequences: false)
            guard let bucket = parts.first, !bucket.isEmpty else { return .failure(Refusal(message: "'\(text)': write s3://BUCKET/KEY")) }
            return .success(.server(type: .s3, remote: nil, fields: ["bucket": .string(String(bucket))],
                                    path: parts.count > 1 ? String(parts[1]) : "", written: text))
        case "sftp", "ftp", "ftps":
            guard let components = URLComponents(string: text), let host = components.host, !host.isEmpty else {
                return .failure(Refusal(message: "'\(text)' is not a URL orchestrate can read: write \(scheme)://[USER@]HOST[:PORT]/PATH"))
            }
            if components.password != nil {
                return .failure(Refusal(message: "'\(text)' holds a password: a command line is visible to every local user and the run "
                    + "is journaled. Define a remote (orchestrate remote; docs/remotes.md) with password: { env: VARIABLE }"))
            }
            var fields: [String: JSONValue] = ["host": .string(host)]
            if let user = components.user { fields["user"] = .string(user) }
            if let port = components.port { fields["port"] = .int(Int64(port)) }
            var path = components.path
            let type: RemoteType
            if scheme == "sftp" {
                type = .sftp
                // sftp://host/abs/path is absolute; sftp://host/~/path, and sftp://host with no path
                // at all (as `sftp HOST` starts), are in the login directory.
                if path.hasPrefix("/~/") || path == "/~" {
                    path = String(path.dropFirst(path == "/~" ? 2 : 3))
                } else if !path.isEmpty {
                    fields["remote_root"] = "/"
                    path = String(path.drop { $0 == "/" })
                }
                if fields["user"] == nil, let me = ProcessInfo.processInfo.environment["USER"] { fields["user"] = .string(me) }
                // The system's ssh, as `sftp user@host` would: ~/.ssh/config, the agent, default keys.
                fields["transport"] = "openssh"
            } else {
                type = .ftp
                // ftps:// is TLS from the first byte (port 990); ftp:// still requires TLS (AUTH TLS):
                // plain FTP only through a remote that says tls: none.
                fields["tls"] = .string(scheme == "ftps" ? "implicit" : "explicit")
                path = String(path.drop { $0 == "/" })  // relative to the login directory, as in RFC 1738
            }
            return .success(.server(type: type, remote: nil, fields: fields, path: path, written: text))
        default:
            return .failure(Refusal(message: "'\(text)': copy reads local paths, REMOTE:PATH, s3://, sftp://, ftp://, ftps://, "
                + "http:// and https:// URLs; not \(scheme)://"))
        }
    }
}
