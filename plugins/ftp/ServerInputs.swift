import OrchestratePluginKit

/// How the control and data connections are protected.
enum TLSMode: String, CaseIterable, InputEnum, Sendable {
    /// `AUTH TLS` on the FTP port, then TLS required for login and every data connection
    /// (libcurl's CURLUSESSL_ALL): refused if the server does not offer it.
    case explicit
    /// TLS from the first byte (`ftps://`, port 990 by default).
    case implicit
    /// Plain FTP: the password and the data travel in clear. Only when written by name.
    case plain = "none"
}

/// Where and how to connect, declared once for ftp.upload and ftp.download.
struct ServerInputs: StepInputs {
    @Input(help: "server name or address", minLength: 1) var host: String
    @Input(help: "the server's port (default 21; 990 with tls: implicit)", minimum: 1, maximum: 65535) var port: Int?
    @Input(help: "login name", minLength: 1) var user: String = "anonymous"
    @Input(help: "the login's password (a secret)") var password: String?
    @Input(help: "explicit (AUTH TLS, required), implicit (ftps://, port 990), or none (plain FTP: credentials in clear)")
    var tls = TLSMode.explicit
    @Input(help: "PEM file of certificates to trust instead of the system store (a private CA)") var caFile: String?
    @Input(help: "remote directory the step's remote paths may not leave (default: the login directory)") var remoteRoot = "."
    @Input(help: "create remote_root when it does not exist (otherwise a missing root is refused)") var createRoot = false
    @Input(help: "seconds to establish a connection", minimum: 1) var connectTimeout = 30
    @Input(help: "seconds without progress or answer before the connection counts as dead", minimum: 1) var ioTimeout = 60
    var rate = RateCapInputs()
}

/// `ServerInputs` made ready for libcurl, read once per attempt. The password lives only here,
/// in memory: never in a URL, a message, an output or a checkpoint.
struct ServerOptions: Sendable {
    var host: String
    var port: Int
    var user: String
    var password: String?
    var tls: TLSMode
    var caFile: String?
    var connectTimeout: Int
    var ioTimeout: Int

    init(_ inputs: ServerInputs, step: StepContext) throws(StepError) {
        // The host goes into a URL: nothing that could end or bend it (user info, path, spaces).
        let forbidden: Set<Character> = ["/", "@", "?", "#", " ", "\\", "%"]
        guard !inputs.host.contains(where: { forbidden.contains($0) || $0.isNewline || $0.asciiValue.map { $0 < 32 || $0 == 127 } == true }) else {
            throw .invalidInput("host \(inputs.host) is not a host name or address", code: "bad_host")
        }
        // The login goes into USER and PASS commands: a CR or LF would end the command and start
        // another (`anonymous\r\nDELE x`), a NUL cut it.
        for (what, value) in [("user", inputs.user), ("password", inputs.password ?? "")]
        where value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) {
            throw .invalidInput("the \(what) holds a line break or a NUL, which would end the FTP command it goes into", code: "bad_login")
        }
        host = inputs.host
        tls = inputs.tls
        port = inputs.port ?? (inputs.tls == .implicit ? 990 : 21)
        user = inputs.user
        password = inputs.password
        caFile = inputs.caFile
        connectTimeout = inputs.connectTimeout
        ioTimeout = inputs.ioTimeout
        if let caFile, access(caFile, R_OK) != 0 {
            throw .invalidInput("ca_file \(caFile) does not exist or cannot be read", code: "ca_file_missing")
        }
        if tls == .plain {
            step.log(.warn, "tls: none: plain FTP to \(host):\(port); the login, the password and the data travel in clear")
        }
    }

    /// The URL scheme and authority (`ftp://host:port`, `ftps://` for implicit TLS).
    var origin: String {
        let name = host.contains(":") ? "[\(host)]" : host
        return (tls == .implicit ? "ftps" : "ftp") + "://\(name):\(port)"
    }

    /// For messages: where, never with whom's password.
    var described: String { "\(host):\(port)" }
}

#if canImport(Glibc)
import Glibc
#endif
