import OrchestrateJSON
import OrchestratePluginKit

/// Where and how to connect: read from a step's `with:` (connect, or any transfer step used
/// standalone). Secrets (password, passphrase) live only in memory, never in outputs.
struct ConnectionParameters: Sendable {
    var host: String
    var port: Int
    var user: String
    var keyFile: String?
    var passphrase: String?
    var password: String?
    var agent: Bool
    var knownHosts: String
    var policy: KnownHosts.Policy
    var keepalive: Int
    var connectTimeout: Int
    /// Seconds without any progress on an open connection before it is declared dead.
    var ioTimeout: Int

    /// The schema properties every connecting step accepts (spliced into their input schemas).
    static let schemaProperties = #"""
        "host":{"type":"string","minLength":1,"description":"server name or address"},
        "port":{"type":"integer","minimum":1,"maximum":65535,"default":22},
        "user":{"type":"string","minLength":1},
        "key_file":{"type":"string","description":"private key file for public-key auth"},
        "passphrase":{"type":"string","description":"the key file's passphrase (a secret)"},
        "password":{"type":"string","description":"password auth (a secret)"},
        "agent":{"type":"boolean","default":false,"description":"authenticate with ssh-agent ($SSH_AUTH_SOCK)"},
        "known_hosts":{"type":"string","description":"OpenSSH known_hosts file (default ~/.ssh/known_hosts)"},
        "host_key_policy":{"type":"string","enum":["strict","accept-new","off"],"default":"strict"},
        "keepalive":{"type":"integer","minimum":0,"default":15,"description":"seconds between keepalives (0: none)"},
        "connect_timeout":{"type":"integer","minimum":1,"default":30},
        "io_timeout":{"type":"integer","minimum":1,"default":60,"description":"seconds without progress before the connection counts as dead"}
        """#

    init(_ step: StepContext) throws(StepError) {
        host = try step.string("host")
        port = Int(try step.optionalInt("port") ?? 22)
        user = try step.string("user")
        keyFile = try step.optionalString("key_file")
        passphrase = try step.optionalString("passphrase")
        password = try step.optionalString("password")
        agent = try step.bool("agent", default: false)
        let home = getenvString("HOME") ?? "/root"
        knownHosts = try step.optionalString("known_hosts") ?? "\(home)/.ssh/known_hosts"
        let policyName = try step.optionalString("host_key_policy") ?? "strict"
        guard let policy = KnownHosts.Policy(rawValue: policyName) else {
            throw .invalidInput("host_key_policy must be strict, accept-new or off")
        }
        self.policy = policy
        keepalive = Int(try step.optionalInt("keepalive") ?? 15)
        connectTimeout = Int(try step.optionalInt("connect_timeout") ?? 30)
        ioTimeout = Int(try step.optionalInt("io_timeout") ?? 60)
        if keyFile == nil && password == nil && !agent {
            throw .invalidInput("no authentication: give key_file, password or agent: true")
        }
    }

    /// True when the step's inputs carry connection fields (it can connect on its own).
    static func present(_ step: StepContext) -> Bool { step.inputs["host"]?.stringValue != nil }
}

#if canImport(Glibc)
import Glibc
#endif

func getenvString(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
