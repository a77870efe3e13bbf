import Foundation
import OrchestrateStore

/// Who may call the API: bearer tokens, each with a name (for people) and an access level.
///
/// The state directory's `http-token` (made on first use, mode 0600, reused across restarts)
/// grants write access; `--http-token-file` adds more, one per line:
///
///     # NAME ACCESS TOKEN
///     grafana  read   3b1c…
///     deployer write  9f7e…
///
/// Tokens are compared in constant time, so response timing says nothing about a guess.
public struct APITokens: Sendable {
    public enum Access: String, Sendable { case read, write }

    public struct Token: Sendable {
        public let name: String
        public let access: Access
        let secret: [UInt8]
    }

    public struct LoadError: Error, CustomStringConvertible {
        public let description: String
    }

    public private(set) var tokens: [Token]

    public init(tokens: [Token]) { self.tokens = tokens }

    /// The file holding the default token in a state directory.
    public static func defaultTokenPath(stateDirectory: String) -> String {
        (stateDirectory as NSString).appendingPathComponent("http-token")
    }

    /// The default token of `stateDirectory`, created (random, 0600) if absent. A state
    /// directory or token file that another user owns or can write, or a token file others can
    /// read, is refused (`OwnedState`): a planted token would let its author drive this `serve`.
    public static func loadOrCreateDefault(stateDirectory: String) throws -> String {
        let path = defaultTokenPath(stateDirectory: stateDirectory)
        try refuseUnowned(stateDirectory, as: .stateDirectory)
        func token(in data: Data) throws(LoadError) -> String {
            let token = String(decoding: data, as: UTF8.self).trimmingCharacters(in: .whitespacesAndNewlines)
            guard token.count >= 16 else { throw LoadError(description: "\(path): the token is too short (delete the file to get a new one)") }
            return token
        }
        if let data = try readOwned(path) { return try token(in: data) }
        try FileManager.default.createDirectory(atPath: stateDirectory, withIntermediateDirectories: true,
                                                attributes: [.posixPermissions: 0o700])
        var bytes = [UInt8](repeating: 0, count: 32)
        var generator = SystemRandomNumberGenerator()
        for i in bytes.indices { bytes[i] = generator.next() }
        let made = bytes.map { String(format: "%02x", $0) }.joined()
        // O_EXCL: two `serve`s starting together agree on one token (the loser reads it).
        let fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0o600)
        guard fd >= 0 else {
            // EEXIST: another `serve` made it first, read theirs; or a link to nowhere is there,
            // which neither reads nor gets replaced: said, not tried again forever.
            if errno == EEXIST {
                if let data = try readOwned(path) { return try token(in: data) }
                throw LoadError(description: "orchestrate refuses the token file \(path): it is a link to a file that does not exist; remove it")
            }
            throw LoadError(description: "cannot create \(path): \(String(cString: strerror(errno)))")
        }
        defer { close(fd) }
        let line = made + "\n"
        guard line.withCString({ write(fd, $0, strlen($0)) }) == line.utf8.count else {
            throw LoadError(description: "cannot write \(path)")
        }
        return made
    }

    /// Parses a `--http-token-file`: `NAME read|write TOKEN` lines, blank lines and `#` comments ignored.
    public static func parseFile(_ path: String) throws -> [Token] {
        guard let data = try readOwned(path), let text = String(data: data, encoding: .utf8) else {
            throw LoadError(description: "cannot read the token file \(path): it is missing or not UTF-8 text")
        }
        var tokens: [Token] = []
        for (n, line) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            if trimmed.isEmpty || trimmed.hasPrefix("#") { continue }
            let fields = trimmed.split(whereSeparator: { $0 == " " || $0 == "\t" })
            guard fields.count == 3, let access = Access(rawValue: String(fields[1])) else {
                throw LoadError(description: "\(path):\(n + 1): expected NAME read|write TOKEN")
            }
            guard fields[2].count >= 16 else {
                throw LoadError(description: "\(path):\(n + 1): token '\(fields[0])' is shorter than 16 characters")
            }
            tokens.append(Token(name: String(fields[0]), access: access, secret: Array(fields[2].utf8)))
        }
        return tokens
    }

    private static func refuseUnowned(_ path: String, as kind: OwnedState.Kind) throws(LoadError) {
        do { try OwnedState.check(path, as: kind) } catch { throw LoadError(description: error.description) }
    }

    /// A token file is a few lines; 1 MiB leaves room for thousands of tokens.
    static let maximumTokenFileSize = 1 << 20

    /// The token file's bytes (nil: missing), checked on the descriptor they are read from.
    private static func readOwned(_ path: String) throws(LoadError) -> Data? {
        do { return try OwnedState.read(path, as: .tokenFile, atMost: maximumTokenFileSize) } catch {
            throw LoadError(description: error.description)
        }
    }

    public static func token(name: String, access: Access, secret: String) -> Token {
        Token(name: name, access: access, secret: Array(secret.utf8))
    }

    /// The token `presented` matches, if any. Every token is compared, each in time that
    /// depends only on the lengths.
    public func match(_ presented: some StringProtocol) -> Token? {
        let bytes = Array(presented.utf8)
        var found: Token?
        for token in tokens where Self.constantTimeEqual(bytes, token.secret) { found = token }
        return found
    }

    static func constantTimeEqual(_ a: [UInt8], _ b: [UInt8]) -> Bool {
        var difference = UInt8(truncatingIfNeeded: a.count ^ b.count) | UInt8(a.count == b.count ? 0 : 1)
        for i in 0..<max(a.count, b.count) {
            difference |= (i < a.count ? a[i] : 0) ^ (i < b.count ? b[i] : 0)
        }
        return difference == 0
    }
}
