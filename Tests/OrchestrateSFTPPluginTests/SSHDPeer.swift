import Foundation
import OrchestrateTestSupport
import Testing

/// The sftp steps' `transport:` values: the tests that must hold for both run once with each.
enum SSHTransportKind: String, CaseIterable, Sendable, CustomTestStringConvertible {
    case libssh2, openssh
    var testDescription: String { rawValue }
}

/// A real OpenSSH sshd on 127.0.0.1 and a free port, started by the test with its own host key,
/// user key, authorized_keys and config, all in a temporary directory. Stopped on deinit;
/// `stop()` and `start()` make an outage (same port, same keys).
final class SSHDPeer: @unchecked Sendable {
    let dir = TemporaryDirectory("sshd")
    let port: Int
    /// Spawned with posix_spawn, not Foundation's Process: Foundation's child monitor blocks in
    /// waitpid on a still-running Process child when another child exits, hanging the tests.
    private var pid: pid_t = 0
    var userKey: String { dir.file("user_key").path }
    var hostKeyPub: String { dir.file("host_key.pub").path }
    /// A directory for remote files (the tests' remote_root).
    var remoteRoot: String { dir.file("remote").path }
    var user: String { NSUserName() }

    struct Failure: Error, CustomStringConvertible { let description: String }

    /// The sshd log so far (logins: "Accepted publickey").
    var log: String { (try? String(contentsOfFile: dir.file("sshd.log").path, encoding: .utf8)) ?? "" }

    /// `passwordAuthentication` also lets users log in with their system password.
    /// `sftpSubsystem` replaces the server's sftp subsystem command (a malicious wrapper).
    init(hostKeyType: String = "ed25519", passwordAuthentication: Bool = false, sftpSubsystem: String? = nil) throws {
        for name in ["host_key", "user_key", "other_host_key"] {
            let r = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/ssh-keygen"),
                                         ["-q", "-t", hostKeyType, "-N", "", "-f", dir.file(name).path])
            guard r.status == 0 else { throw Failure(description: "ssh-keygen: \(r.stderr)") }
        }
        try FileManager.default.copyItem(atPath: dir.file("user_key.pub").path, toPath: dir.file("authorized_keys").path)
        try FileManager.default.createDirectory(atPath: dir.file("remote").path, withIntermediateDirectories: true)
        try? FileManager.default.createDirectory(atPath: "/run/sshd", withIntermediateDirectories: true,
                                                 attributes: [.posixPermissions: 0o755])
        port = SSHDPeer.freePort()
        let sftpServer = sftpSubsystem ?? (FileManager.default.fileExists(atPath: "/usr/lib/openssh/sftp-server")
            ? "/usr/lib/openssh/sftp-server" : "internal-sftp")
        dir.write("sshd_config", """
            Port \(port)
            ListenAddress 127.0.0.1
            HostKey \(dir.file("host_key").path)
            AuthorizedKeysFile \(dir.file("authorized_keys").path)
            PidFile \(dir.file("sshd.pid").path)
            StrictModes no
            UsePAM no
            PermitRootLogin yes
            PasswordAuthentication \(passwordAuthentication ? "yes" : "no")
            KbdInteractiveAuthentication no
            MaxStartups 100
            MaxSessions 100
            Subsystem sftp \(sftpServer)
            """)
        try Data().write(to: dir.file("sshd.log"))
        try start()
    }

    /// Starts the server (again, after `stop`) and waits until it accepts connections.
    func start() throws {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_addopen(&actions, 0, "/dev/null", O_RDONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0)
        posix_spawn_file_actions_addopen(&actions, 2, dir.file("sshd.log").path, O_WRONLY | O_APPEND, 0)
        let args: [String] = ["/usr/sbin/sshd", "-D", "-e", "-f", dir.file("sshd_config").path]
        let argv: [UnsafeMutablePointer<CChar>?] = args.map { strdup($0) } + [nil]
        defer { for p in argv { free(p) } }
        var child: pid_t = 0
        guard posix_spawn(&child, "/usr/sbin/sshd", &actions, nil, argv, environ) == 0 else {
            throw Failure(description: "cannot start /usr/sbin/sshd")
        }
        pid = child
        let deadline = Date().addingTimeInterval(10)
        while !SSHDPeer.accepts(port) {
            guard Date() < deadline, kill(pid, 0) == 0 else {
                throw Failure(description: "sshd did not start: \((try? String(contentsOfFile: dir.file("sshd.log").path, encoding: .utf8)) ?? "")")
            }
            Thread.sleep(forTimeInterval: 0.05)
        }
    }

    /// Stops the server and drops every connection: the port refuses connections until `start`.
    func stop() {
        guard pid > 0 else { return }
        killChildren()
        kill(pid, SIGTERM)
        var status: Int32 = 0
        waitpid(pid, &status, 0)
        pid = 0  // reaped: its number may be another process's now
        let deadline = Date().addingTimeInterval(10)
        while SSHDPeer.accepts(port) && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
    }

    deinit { stop() }

    /// A known_hosts file recording this server's real host key (or `other_host_key`: a changed key).
    func knownHosts(changed: Bool = false, hashed: Bool = false) throws -> String {
        let pub = try String(contentsOfFile: dir.file(changed ? "other_host_key.pub" : "host_key.pub").path, encoding: .utf8)
        let fields = pub.split(separator: " ")
        let name = "known_hosts-\(changed)-\(hashed)"
        let path = dir.write(name, "# test\n[127.0.0.1]:\(port) \(fields[0]) \(fields[1])\n").path
        if hashed {
            let r = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/ssh-keygen"), ["-H", "-f", path])
            guard r.status == 0 else { throw Failure(description: "ssh-keygen -H: \(r.stderr)") }
        }
        return path
    }

    /// The host key's fingerprint as `ssh-keygen -l` prints it (SHA256:…).
    func fingerprint() throws -> String {
        let r = try ChildProcess.run(URL(fileURLWithPath: "/usr/bin/ssh-keygen"), ["-l", "-f", hostKeyPub])
        return String(r.stdout.split(separator: " ")[1])
    }

    /// The sshd processes serving connections (children of the listener).
    func children() -> [Int32] {
        guard let r = try? ChildProcess.run(URL(fileURLWithPath: "/usr/bin/pgrep"), ["-P", "\(pid)"]) else { return [] }
        return r.stdout.split(separator: "\n").compactMap { Int32($0) }
    }

    /// The ssh clients (transport: openssh) connected to this server, directly or as a jump host:
    /// their command lines name its port.
    func sshClients() -> [Int32] {
        let pattern = "^ssh .*(-p \(port) |\\]:\(port)( |$))"
        guard let r = try? ChildProcess.run(URL(fileURLWithPath: "/usr/bin/pgrep"), ["-f", pattern]) else { return [] }
        return r.stdout.split(separator: "\n").compactMap { Int32($0) }
    }

    /// Kills every connection's sshd (the connections drop mid-transfer).
    @discardableResult
    func killChildren() -> Int {
        let pids = children()
        for pid in pids { kill(pid, SIGKILL) }
        return pids.count
    }

    /// `with:` fields that connect to this server with the user key.
    func connection(knownHosts: String, policy: String = "strict", transport: SSHTransportKind = .libssh2) -> String {
        """
        host: 127.0.0.1
              port: \(port)
              user: \(user)
              key_file: \(userKey)
              known_hosts: \(knownHosts)
              host_key_policy: \(policy)
              transport: \(transport.rawValue)
        """
    }

    private static func freePort() -> Int { Ports.free() }

    private static func accepts(_ port: Int) -> Bool {
        let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        defer { close(fd) }
        var addr = sockaddr_in()
        addr.sin_family = sa_family_t(AF_INET)
        addr.sin_addr.s_addr = inet_addr("127.0.0.1")
        addr.sin_port = UInt16(port).bigEndian
        return withUnsafeMutablePointer(to: &addr) {
            $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size)) }
        } == 0
    }
}
