import OrchestrateJSON
import OrchestratePluginKit

/// Where and how to connect: read from a step's `with:` (connect, or any transfer step used
/// standalone). Secrets (password, passphrase) live only in memory, never in outputs.
struct ConnectionParameters: Sendable {
    /// Who speaks SSH: libssh2 in this process, or the system's `ssh` (OpenSSHTransport.swift).
    enum Transport: String, Sendable, CaseIterable, InputEnum { case libssh2, openssh }

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

    /// The connection fields of `inputs`; invalid-input when they do not make a connection.
    init(_ inputs: ConnectionInputs) throws(StepError) {
        guard let host = inputs.host else { throw .invalidInput("input '\(inputs.$host.name)' is required", code: "missing_input") }
        guard let user = inputs.user else { throw .invalidInput("input '\(inputs.$user.name)' is required", code: "missing_input") }
        self.host = host
        self.user = user
        transport = inputs.transport
        sshConfig = inputs.sshConfig
        proxyJump = inputs.proxyJump
        port = inputs.port
        keyFile = inputs.keyFile
        passphrase = inputs.passphrase
        password = inputs.password
        agent = inputs.agent
        knownHosts = inputs.knownHosts ?? "\(getenvString("HOME") ?? "/root")/.ssh/known_hosts"
        policy = inputs.hostKeyPolicy
        keepalive = inputs.keepalive
        connectTimeout = inputs.connectTimeout
        ioTimeout = inputs.ioTimeout
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
}

extension ConnectionParameters {
    /// Refuses a `key_file` or `known_hosts` file that is missing or unreadable, naming it,
    /// before libssh2 or ssh report it in their own words (or as an unknown host). A missing
    /// known_hosts is fine where it may be created (`accept-new`) or is not read (`off`).
    func checkFiles() throws(StepError) {
        if let keyFile {
            try ConnectionParameters.readable(keyFile, input: "key_file")
        }
        if policy == .strict {
            try ConnectionParameters.readable(knownHosts, input: "known_hosts", hint: """
                 (host_key_policy: strict checks the server's key against it: give the file that records this \
                host, or use host_key_policy: accept-new to record it on the first connection)
                """)
        }
    }

    private static func readable(_ path: String, input: String, hint: String = "") throws(StepError) {
        guard access(path, R_OK) != 0 else { return }
        let reason = errno == ENOENT || errno == ENOTDIR ? "does not exist" : "cannot be read (\(String(cString: strerror(errno))))"
        throw .invalidInput("\(input) \(path) \(reason)\(hint)", code: input == "key_file" ? "key_file_missing" : "known_hosts_missing")
    }
}

/// Where and how to connect, declared once for every step that connects (`sftp.connect`, and
/// the transfer steps used without a session).
struct ConnectionInputs: StepInputs {
    @Input(help: "server name or address", minLength: 1) var host: String?
    @Input(help: "the server's SSH port", minimum: 1, maximum: 65535) var port = 22
    @Input(help: "login name", minLength: 1) var user: String?
    @Input(help: "private key file for public-key auth") var keyFile: String?
    @Input(help: "the key file's passphrase (a secret)") var passphrase: String?
    @Input(help: "password auth (a secret)") var password: String?
    @Input(help: "authenticate with ssh-agent ($SSH_AUTH_SOCK)") var agent = false
    @Input(help: "OpenSSH known_hosts file (default ~/.ssh/known_hosts)") var knownHosts: String?
    @Input(help: "a host key known_hosts lacks: refused (strict), recorded (accept-new), or no check (off)")
    var hostKeyPolicy = KnownHosts.Policy.strict
    @Input(help: "seconds between keepalives (0: none)", minimum: 0) var keepalive = 15
    @Input(help: "seconds to establish a connection", minimum: 1) var connectTimeout = 30
    @Input(help: "seconds without progress before the connection counts as dead", minimum: 1) var ioTimeout = 60
    @Input(help: "libssh2 in the plugin, or the system's ssh (-s sftp): its ~/.ssh/config, ProxyJump, certificates, agents")
    var transport = ConnectionParameters.Transport.libssh2
    @Input(help: "transport openssh: the ssh client config file (ssh -F; default ~/.ssh/config and /etc/ssh/ssh_config)")
    var sshConfig: String?
    @Input(help: "transport openssh: jump host(s), as ssh -J takes them ([user@]host[:port][,...])") var proxyJump: String?
}

/// How a transfer step reaches the server: a session opened by sftp.connect, or connection
/// fields of its own (standalone use, or to reconnect after a resume in a new process).
struct ServerInputs: StepInputs {
    @Input(help: "session output of sftp.connect") var session: String?
    @Input(help: "remote directory the step's remote paths may not leave") var remoteRoot = "."
    @Input(help: "create remote_root when it does not exist (otherwise a missing root is refused)") var createRoot = false
    var connection = ConnectionInputs()
}

#if canImport(Glibc)
import Glibc
#endif

func getenvString(_ name: String) -> String? { getenv(name).map { String(cString: $0) } }
