import OrchestrateJSON
import OrchestratePluginKit

/// Where and how to connect: read from a step's `with:` (connect, or any transfer step used
/// standalone). Secrets (password, passphrase) live only in memory, never in outputs.
struct ConnectionParameters: Sendable {
    /// Who speaks SSH: libssh2 in this process, or the system's `ssh` (OpenSSHTransport.swift).
    enum Transport: String, Sendable { case libssh2, openssh }

    var transport: Transport
    /// `transport: openssh` only: an OpenSSH client config (`ssh -F`) and a jump host (`ssh -J`).
    var sshConfig: String?
    var proxyJump: String?
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
        "io_timeout":{"type":"integer","minimum":1,"default":60,"description":"seconds without progress before the connection counts as dead"},
        "transport":{"type":"string","enum":["libssh2","openssh"],"default":"libssh2","description":"libssh2 in the plugin, or the system's ssh (-s sftp): its ~/.ssh/config, ProxyJump, certificates, agents"},
        "ssh_config":{"type":"string","description":"transport openssh: the ssh client config file (ssh -F; default ~/.ssh/config and /etc/ssh/ssh_config)"},
        "proxy_jump":{"type":"string","description":"transport openssh: jump host(s), as ssh -J takes them ([user@]host[:port][,...])"}
        """#

    init(_ step: StepContext) throws(StepError) {
        let transportName = try step.optionalString("transport") ?? "libssh2"
        guard let transport = Transport(rawValue: transportName) else {
            throw .invalidInput("transport must be libssh2 or openssh, not \(transportName)")
        }
        self.transport = transport
        sshConfig = try step.optionalString("ssh_config")
        proxyJump = try step.optionalString("proxy_jump")
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
        switch transport {
        case .libssh2:
            if keyFile == nil && password == nil && !agent {
                throw .invalidInput("no authentication: give key_file, password or agent: true")
            }
            if sshConfig != nil || proxyJump != nil {
                throw .invalidInput("ssh_config and proxy_jump need transport: openssh (libssh2 reads no ssh config)")
            }
        case .openssh:
            // ssh runs with BatchMode=yes: it never prompts, so a secret cannot be typed in.
            if password != nil || passphrase != nil {
                throw .invalidInput("""
                    transport: openssh takes no password or passphrase (ssh never prompts here): give a key_file \
                    without passphrase, load the key into ssh-agent (agent: true), or use transport: libssh2
                    """)
            }
        }
    }

    /// True when the step's inputs carry connection fields (it can connect on its own).
    static func present(_ step: StepContext) -> Bool { step.inputs["host"]?.stringValue != nil }
}

#if canImport(Glibc)
import Glibc
#endif

func getenvString(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
