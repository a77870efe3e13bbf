#if canImport(Glibc)
import Glibc
#endif

/// Where a step's keys and region come from, in the order the AWS CLI looks:
/// 1. the step's own inputs (`access_key_id` + `secret_access_key` [+ `session_token`]), which a
///    workflow fills from its secrets;
/// 2. the step's `profile` input, from the shared files;
/// 3. `AWS_ACCESS_KEY_ID` + `AWS_SECRET_ACCESS_KEY` [+ `AWS_SESSION_TOKEN`];
/// 4. the profile `AWS_PROFILE` names (else `default`) in `~/.aws/credentials`
///    (`AWS_SHARED_CREDENTIALS_FILE`) and `~/.aws/config` (`AWS_CONFIG_FILE`, section
///    `[profile NAME]`; the credentials file wins).
/// The region: the `region` input, `AWS_REGION`, `AWS_DEFAULT_REGION`, the profile's `region`,
/// else `us-east-1`.
///
/// No I/O but reading the two files (through `readFile`, so tests give their own).
public struct CredentialChain {
    public struct Failure: Error, Sendable, CustomStringConvertible {
        public let description: String
    }

    public struct Explicit {
        public var accessKeyID: String?
        public var secretAccessKey: String?
        public var sessionToken: String?
        public var profile: String?
        public var region: String?
        public init(accessKeyID: String? = nil, secretAccessKey: String? = nil, sessionToken: String? = nil,
                    profile: String? = nil, region: String? = nil)
        {
            self.accessKeyID = accessKeyID
            self.secretAccessKey = secretAccessKey
            self.sessionToken = sessionToken
            self.profile = profile
            self.region = region
        }
    }

    public let environment: [String: String]
    public let readFile: (String) -> String?

    public init(environment: [String: String], readFile: @escaping (String) -> String? = CredentialChain.readSmallFile) {
        self.environment = environment
        self.readFile = readFile
    }

    /// The credentials and region for a step; a failure says what to set.
    public func resolve(_ explicit: Explicit) throws(Failure) -> (credentials: AWSCredentials, region: String) {
        let env = { (name: String) -> String? in self.environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        let profileName = explicit.profile ?? env("AWS_PROFILE") ?? "default"
        let (profile, found) = loadProfile(profileName)
        let region = explicit.region ?? env("AWS_REGION") ?? env("AWS_DEFAULT_REGION") ?? profile["region"] ?? "us-east-1"

        if explicit.accessKeyID != nil || explicit.secretAccessKey != nil {
            guard let id = explicit.accessKeyID, !id.isEmpty, let secret = explicit.secretAccessKey, !secret.isEmpty else {
                throw Failure(description: "access_key_id and secret_access_key go together: give both (from the workflow's secrets) or neither")
            }
            return (AWSCredentials(accessKeyID: id, secretAccessKey: secret, sessionToken: explicit.sessionToken, source: "the step's inputs"), region)
        }
        if explicit.profile == nil, let id = env("AWS_ACCESS_KEY_ID") {
            guard let secret = env("AWS_SECRET_ACCESS_KEY") else {
                throw Failure(description: "AWS_ACCESS_KEY_ID is set but AWS_SECRET_ACCESS_KEY is not: set both")
            }
            return (AWSCredentials(accessKeyID: id, secretAccessKey: secret, sessionToken: env("AWS_SESSION_TOKEN"), source: "the environment"), region)
        }
        let named = explicit.profile != nil || env("AWS_PROFILE") != nil
        if named && !found {
            throw Failure(description: "profile \(profileName) is in neither \(credentialsPath) nor \(configPath)")
        }
        if let id = profile["aws_access_key_id"] {
            guard let secret = profile["aws_secret_access_key"] else {
                throw Failure(description: "profile \(profileName) has aws_access_key_id but no aws_secret_access_key")
            }
            return (AWSCredentials(accessKeyID: id, secretAccessKey: secret, sessionToken: profile["aws_session_token"],
                                   source: "profile \(profileName)"), region)
        }
        if let unsupported = ["role_arn", "sso_session", "sso_start_url", "credential_process", "web_identity_token_file"]
            .first(where: { profile[$0] != nil })
        {
            throw Failure(description: "profile \(profileName) gets its keys through \(unsupported), which the s3 plugin does not support yet; "
                + "export them first (eval \"$(aws configure export-credentials --profile \(profileName) --format env)\")")
        }
        if named { throw Failure(description: "profile \(profileName) has no aws_access_key_id") }
        throw Failure(description: """
            no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or AWS_PROFILE with ~/.aws/credentials, \
            or give access_key_id and secret_access_key from the workflow's secrets
            """)
    }

    /// The endpoint a step that names none uses, as the AWS SDKs and CLI find it:
    /// `AWS_ENDPOINT_URL_S3`, `AWS_ENDPOINT_URL`, then in the profile (`profile`, else
    /// `AWS_PROFILE`, else `default`) of the config file the `s3` block's `endpoint_url` of the
    /// `[services NAME]` section its `services` names, then its own `endpoint_url`. None (AWS)
    /// when `AWS_IGNORE_CONFIGURED_ENDPOINT_URLS` is true. Returns the URL and where it came from.
    public func endpoint(profile explicitProfile: String?) -> (url: String, source: String)? {
        let env = { (name: String) -> String? in self.environment[name].flatMap { $0.isEmpty ? nil : $0 } }
        if env("AWS_IGNORE_CONFIGURED_ENDPOINT_URLS")?.lowercased() == "true" { return nil }
        if let url = env("AWS_ENDPOINT_URL_S3") { return (url, "AWS_ENDPOINT_URL_S3") }
        if let url = env("AWS_ENDPOINT_URL") { return (url, "AWS_ENDPOINT_URL") }
        let name = explicitProfile ?? env("AWS_PROFILE") ?? "default"
        guard let config = readFile(configPath).map(IniFile.parse) else { return nil }
        let profile = config[name == "default" ? "default" : "profile \(name)"] ?? [:]
        if let services = profile["services"], let url = config["services \(services)"]?["s3.endpoint_url"], !url.isEmpty {
            return (url, "the services \(services) section of \(configPath)")
        }
        if let url = profile["endpoint_url"], !url.isEmpty { return (url, "profile \(name) of \(configPath)") }
        return nil
    }

    var credentialsPath: String { environment["AWS_SHARED_CREDENTIALS_FILE"] ?? "\(home)/.aws/credentials" }
    var configPath: String { environment["AWS_CONFIG_FILE"] ?? "\(home)/.aws/config" }
    private var home: String { environment["HOME"] ?? "/root" }

    /// The profile's settings (the credentials file's over the config file's) and whether either
    /// file has the profile.
    private func loadProfile(_ name: String) -> ([String: String], Bool) {
        let fromConfig = readFile(configPath).map { IniFile.parse($0)[name == "default" ? "default" : "profile \(name)"] } ?? nil
        let fromCredentials = readFile(credentialsPath).map { IniFile.parse($0)[name] } ?? nil
        var merged = fromConfig ?? [:]
        for (key, value) in fromCredentials ?? [:] { merged[key] = value }
        return (merged, fromConfig != nil || fromCredentials != nil)
    }

    /// A regular file's text, at most 1 MiB (the shared files are small); nil when unreadable.
    public static func readSmallFile(_ path: String) -> String? {
        let fd = open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { return nil }
        defer { close(fd) }
        var bytes = [UInt8]()
        var buffer = [UInt8](repeating: 0, count: 64 * 1024)
        while bytes.count < 1 << 20 {
            let n = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            if n <= 0 { break }
            bytes += buffer.prefix(n)
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}

/// The AWS shared files' INI dialect: `[section]`, `key = value`, `#` and `;` comments; the
/// indented lines of a nested block (`s3 =` followed by `  endpoint_url = URL`) are kept as
/// `s3.endpoint_url`.
public enum IniFile {
    public static func parse(_ text: String) -> [String: [String: String]] {
        var sections: [String: [String: String]] = [:]
        var current: String?
        /// The key of the nested block the indented lines belong to (`s3 =`).
        var block: String?
        for raw in text.split(omittingEmptySubsequences: true, whereSeparator: { $0 == "\n" || $0 == "\r\n" || $0 == "\r" }) {
            let indented = raw.first == " " || raw.first == "\t"
            let line = SigV4.collapseSpaces(String(raw))
            if line.isEmpty || line.hasPrefix("#") || line.hasPrefix(";") { continue }
            if !indented && line.hasPrefix("[") && line.hasSuffix("]") {
                let name = SigV4.collapseSpaces(String(line.dropFirst().dropLast()))
                current = name
                block = nil
                if sections[name] == nil { sections[name] = [:] }
            } else if let current, let equals = line.firstIndex(of: "=") {
                let key = SigV4.collapseSpaces(String(line[..<equals])).lowercased()
                let value = SigV4.collapseSpaces(String(line[line.index(after: equals)...]))
                if indented {
                    if let block { sections[current]?["\(block).\(key)"] = value }
                } else {
                    sections[current]?[key] = value
                    block = value.isEmpty ? key : nil
                }
            }
        }
        return sections
    }
}
