#if canImport(Glibc)
import Glibc
#endif
import OrchestratePluginKit

/// Host-key checking against an OpenSSH known_hosts file: plain and hashed (`|1|salt|hmac`)
/// host patterns, `[host]:port` for non-22 ports, `*`/`?` wildcards, `!` negation, `@revoked`.
///
/// Policies follow OpenSSH's StrictHostKeyChecking: `strict` refuses unknown hosts, `accept-new`
/// records them, `off` accepts anything. A key that differs from a recorded one for the same
/// host and key type is refused under every policy but `off` (that is how a MITM looks).
struct KnownHosts {
    enum Policy: String, CaseIterable, InputEnum { case strict, acceptNew = "accept-new", off }

    enum Verdict: Equatable { case known, unknown, changed, revoked }

    let path: String

    /// The name a host is recorded under: `host`, or `[host]:port` when the port is not 22.
    static func hostName(_ host: String, port: Int) -> String { port == 22 ? host : "[\(host)]:\(port)" }

    /// The key type named at the start of an SSH public-key blob (`ssh-ed25519`).
    static func keyType(_ blob: [UInt8]) -> String {
        guard blob.count >= 4 else { return "" }
        let n = Int(blob[0]) << 24 | Int(blob[1]) << 16 | Int(blob[2]) << 8 | Int(blob[3])
        guard n <= blob.count - 4 else { return "" }
        return String(decoding: blob[4 ..< 4 + n], as: UTF8.self)
    }

    /// `SHA256:` + unpadded base64 of the blob's SHA-256, exactly as `ssh-keygen -l` prints it.
    static func fingerprint(_ blob: [UInt8]) -> String {
        "SHA256:" + Base64.encode(Digest.sha256(blob), padding: false)
    }

    func check(host: String, port: Int, key: [UInt8]) -> Verdict {
        let name = KnownHosts.hostName(host, port: port)
        let type = KnownHosts.keyType(key)
        var verdict = Verdict.unknown
        for line in lines() {
            var fields = line.split(whereSeparator: { $0 == " " || $0 == "\t" })
            var revoked = false
            if let first = fields.first, first.hasPrefix("@") {
                if first == "@revoked" { revoked = true } else { continue } // @cert-authority: not for plain keys
                fields.removeFirst()
            }
            guard fields.count >= 3, KnownHosts.matches(patterns: fields[0], name: name),
                  let blob = Base64.decode(fields[2]) else { continue }
            if revoked { if blob == key { return .revoked }; continue }
            guard fields[1] == type else { continue }
            if blob == key { return .known }
            verdict = .changed
        }
        return verdict
    }

    /// Appends `name type base64` (what accept-new records), creating the file and its folder.
    func add(host: String, port: Int, key: [UInt8]) throws(StepError) {
        let line = "\(KnownHosts.hostName(host, port: port)) \(KnownHosts.keyType(key)) \(Base64.encode(key))\n"
        let dir = path.split(separator: "/", omittingEmptySubsequences: false).dropLast().joined(separator: "/")
        if !dir.isEmpty { mkdir(dir, 0o700) }
        let fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0o600)
        guard fd >= 0 else { throw StepError.posix("cannot write \(path)") }
        defer { close(fd) }
        let written = line.withCString { write(fd, $0, strlen($0)) }
        if written < 0 { throw StepError.posix("cannot write \(path)") }
    }

    private func lines() -> [Substring] {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return [] }
        defer { close(fd) }
        var bytes = [UInt8](), buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let n = read(fd, &buffer, buffer.count)
            if n <= 0 { break }
            bytes += buffer[0 ..< n]
        }
        return String(decoding: bytes, as: UTF8.self).split(separator: "\n")
            .map { $0.drop(while: { $0 == " " || $0 == "\t" }) }
            .filter { !$0.isEmpty && !$0.hasPrefix("#") }
    }

    /// Whether a host-pattern field (comma-separated, or one hashed entry) names `name`.
    static func matches(patterns: Substring, name: String) -> Bool {
        if patterns.hasPrefix("|1|") {
            let parts = patterns.split(separator: "|")
            guard parts.count == 3, let salt = Base64.decode(parts[1]), let hash = Base64.decode(parts[2]) else { return false }
            return Digest.hmacSHA1(key: salt, message: Array(name.utf8)) == hash
        }
        var matched = false
        for pattern in patterns.split(separator: ",") {
            if pattern.hasPrefix("!") {
                if glob(pattern.dropFirst(), name.lowercased()) { return false }
            } else if glob(pattern, name.lowercased()) {
                matched = true
            }
        }
        return matched
    }

    /// OpenSSH's match_pattern: only `*` and `?` are special (so `[host]:port` is literal).
    static func glob(_ pattern: Substring, _ name: String) -> Bool {
        let p = Array(pattern.lowercased().utf8), n = Array(name.utf8)
        var pi = 0, ni = 0, star = -1, mark = 0
        while ni < n.count {
            if pi < p.count && (p[pi] == UInt8(ascii: "?") || p[pi] == n[ni]) { pi += 1; ni += 1 }
            else if pi < p.count && p[pi] == UInt8(ascii: "*") { star = pi; mark = ni; pi += 1 }
            else if star >= 0 { pi = star + 1; mark += 1; ni = mark }
            else { return false }
        }
        while pi < p.count && p[pi] == UInt8(ascii: "*") { pi += 1 }
        return pi == p.count
    }
}
