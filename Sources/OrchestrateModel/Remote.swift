// Named connections (`remotes:`): a server's address, credentials and options written once and
// used by steps as `with: { remote: NAME }`. The language is the same in a workflow's
// `remotes:` and in the user's remotes file (docs/remotes.md).
import OrchestrateJSON

/// The kinds of remote, each tied to the plugin whose steps it serves (`s3.*` steps take an `s3`
/// remote).
public enum RemoteType: String, Sendable, CaseIterable {
    case s3, sftp, ftp, http

    /// The step inputs a remote of this type may hold: the connection, never what is transferred.
    public var fields: [String] {
        switch self {
        case .s3:
            ["endpoint", "region", "bucket", "profile", "access_key_id", "secret_access_key", "session_token",
             "addressing_style", "ca_file", "connect_timeout", "io_timeout", "max_rate"]
        case .sftp:
            ["host", "port", "user", "key_file", "passphrase", "password", "agent", "known_hosts", "host_key_policy",
             "transport", "ssh_config", "proxy_jump", "remote_root", "create_root", "keepalive", "connect_timeout",
             "io_timeout", "max_rate"]
        case .ftp:
            ["host", "port", "user", "password", "tls", "ca_file", "remote_root", "create_root", "connect_timeout",
             "io_timeout", "max_rate"]
        case .http:
            ["headers", "ca_file", "insecure", "connect_timeout", "follow_redirects", "min_speed", "min_speed_time",
             "max_rate"]
        }
    }

    /// Fields that may only come by reference (`{ env: VAR }` or `{ file: PATH }`): written inline
    /// they would sit in a file that is read, copied and shown.
    public var secretFields: [String] {
        switch self {
        case .s3: ["secret_access_key", "session_token"]
        case .sftp: ["password", "passphrase"]
        case .ftp: ["password"]
        case .http: []
        }
    }

    /// The remote type a step type takes: the plugin part of its id (`s3.upload` → `s3`).
    public init?(stepType: String) {
        guard let dot = stepType.firstIndex(of: ".") else { return nil }
        self.init(rawValue: String(stepType[..<dot]))
    }
}

/// Where a remote field's value comes from.
public enum RemoteValue: Sendable, Equatable {
    /// Written in the remote (never a secret field).
    case literal(JSONValue)
    /// Read from this environment variable at every attempt, as a workflow secret.
    case environment(String)
    /// Read from this file at every attempt, as a workflow secret.
    case file(String)

    /// True for a value read at run time: it is handled as a secret (masked, never stored).
    public var isReference: Bool {
        if case .literal = self { return false }
        return true
    }
}

/// One field of a remote.
public struct RemoteField: Sendable {
    public let name: String
    public let value: RemoteValue
    public let location: SourceLocation
    /// The value's node, so a literal keeps its location when it is checked as a step input.
    let node: YAMLNode
}

/// One named connection.
public struct Remote: Sendable {
    public let name: String
    public let type: RemoteType
    /// In the order written.
    public let fields: [RemoteField]
    /// The remote's name, where it is defined.
    public let location: SourceLocation

    public func field(_ name: String) -> RemoteField? { fields.first { $0.name == name } }
}

/// Remotes by name: one file's, or one workflow's.
public struct RemoteCatalog: Sendable {
    /// In the order written.
    public let remotes: [Remote]

    public init(remotes: [Remote] = []) { self.remotes = remotes }

    public subscript(name: String) -> Remote? { remotes.first { $0.name == name } }

    public var names: [String] { remotes.map(\.name) }

    /// Parses a remotes file (`remotes:` at the top, the same shape as in a workflow); every
    /// error at once, as `FILE:LINE:COL`.
    public static func parse(source: String, file: String) throws(WorkflowErrors) -> RemoteCatalog {
        let text = SourceText(file: file, text: source)
        let root: YAMLNode?
        switch YAMLReader.read(source, source: text) {
        case .failure(let d): throw WorkflowErrors(diagnostics: [d])
        case .success(let node): root = node
        }
        var decoder = RemoteDecoder(reader: FieldReader(source: text))
        var remotes: [Remote] = []
        if let root {
            if let fields = decoder.reader.fields(of: root, place: "at the top level of a remotes file", allowed: ["remotes"],
                                                  what: "a remotes file"),
               let pair = fields["remotes"]
            {
                remotes = decoder.decode(pair.value)
            }
        }
        guard decoder.reader.bag.diagnostics.isEmpty else { throw WorkflowErrors(diagnostics: decoder.reader.bag.diagnostics) }
        return RemoteCatalog(remotes: remotes)
    }
}

/// The user's remotes, read only when a workflow names a remote it does not define itself.
/// The engine's `RemotesFile` reads `$XDG_CONFIG_HOME/orchestrate/remotes.yaml`; tests give a
/// fixed catalog.
public protocol RemoteDefinitions: Sendable {
    /// The remotes, or why they cannot be used (an unsafe file, a syntax error in it).
    func userRemotes() -> Result<RemoteCatalog, RemotesUnavailable>
}

/// Why the user's remotes cannot be used: the file's own errors (with their locations), or a
/// refusal of the file itself.
public struct RemotesUnavailable: Error, Sendable {
    public let reason: String
    public let diagnostics: [Diagnostic]

    public init(reason: String, diagnostics: [Diagnostic] = []) {
        self.reason = reason
        self.diagnostics = diagnostics
    }
}

/// A fixed catalog as the user's remotes.
public struct StaticRemotes: RemoteDefinitions {
    public let catalog: RemoteCatalog
    public init(_ catalog: RemoteCatalog) { self.catalog = catalog }
    public func userRemotes() -> Result<RemoteCatalog, RemotesUnavailable> { .success(catalog) }
}
