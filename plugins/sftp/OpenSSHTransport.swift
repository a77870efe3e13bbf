#if canImport(Glibc)
import Glibc
#endif
import OrchestratePluginKit

/// `transport: openssh`: the system's `ssh -s sftp` as a child process (as OpenSSH's own `sftp`
/// runs it), its stdin and stdout one end of a socket pair that the SFTP channel speaks over. ssh
/// does the handshake, the host-key check (strict, against the step's known_hosts), the
/// authentication and the encryption; its stderr is read for the host key's fingerprint and for
/// the reason when it ends.
///
/// The child leads its own process group (a Ctrl-C on the terminal is orchestrate's to handle,
/// not ssh's); closing ends the group (ssh and a ProxyJump ssh under it). If orchestrate dies,
/// ssh reads end-of-file on its stdin and exits: no orphan.
final class OpenSSHTransport: SSHTransport {
    private let parameters: ConnectionParameters
    private let pid: pid_t
    /// Our end of ssh's stdin + stdout (non-blocking).
    private let data: Int32
    /// Our end of ssh's stderr (non-blocking); -1 once it reached end of file.
    private var stderrFD: Int32
    private let lock = Lock()
    // Guarded by `lock` (the step's thread reads them too, in `established` and `fingerprint`):
    private var stderrLine: [UInt8] = []
    private var reportedFingerprint = ""
    private var reportedKeyType = ""
    private var messages: [String] = []
    /// Set once ssh exited (reaped): the group is gone too.
    private var exitStatus: Int32?
    private var failure: StepError?

    var fingerprint: String {
        lock.withLock { () -> String in
            readStderr()
            return reportedFingerprint
        }
    }

    init(_ parameters: ConnectionParameters, step: StepContext) throws(StepError) {
        self.parameters = parameters
        var dataPair: [Int32] = [-1, -1], errorPair: [Int32] = [-1, -1]
        let type = Int32(SOCK_STREAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue)
        guard socketpair(AF_UNIX, type, 0, &dataPair) == 0 else {
            throw .retryable("cannot create a socket pair for ssh: \(String(cString: strerror(errno)))")
        }
        guard socketpair(AF_UNIX, type, 0, &errorPair) == 0 else {
            let error = errno
            Glibc.close(dataPair[0]); Glibc.close(dataPair[1])
            throw .retryable("cannot create a socket pair for ssh: \(String(cString: strerror(error)))")
        }
        // Bigger buffers than the default ~200 KiB: fewer wake-ups per MiB both ways.
        for fd in dataPair {
            var size: Int32 = 4 << 20
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
        }
        defer { Glibc.close(dataPair[1]); Glibc.close(errorPair[1]) }
        do {
            pid = try OpenSSHTransport.spawn(OpenSSHCommand.arguments(parameters), stdio: dataPair[1], stderr: errorPair[1])
        } catch {
            for fd in [dataPair[0], errorPair[0]] { Glibc.close(fd) }
            throw error
        }
        data = dataPair[0]
        stderrFD = errorPair[0]
        for fd in [data, stderrFD] { _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK) }
    }

    /// Starts `ssh ARGUMENTS` (found on PATH) with `stdio` as its stdin and stdout, `stderr` as
    /// its stderr, in a process group of its own, with default signal handling.
    private static func spawn(_ arguments: [String], stdio: Int32, stderr: Int32) throws(StepError) -> pid_t {
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, stdio, 0)
        posix_spawn_file_actions_adddup2(&actions, stdio, 1)
        posix_spawn_file_actions_adddup2(&actions, stderr, 2)
        var attributes = posix_spawnattr_t()
        posix_spawnattr_init(&attributes)
        defer { posix_spawnattr_destroy(&attributes) }
        var noSignals = sigset_t(), allSignals = sigset_t()
        sigemptyset(&noSignals)
        sigfillset(&allSignals)
        posix_spawnattr_setsigmask(&attributes, &noSignals)
        posix_spawnattr_setsigdefault(&attributes, &allSignals)
        posix_spawnattr_setpgroup(&attributes, 0)
        posix_spawnattr_setflags(&attributes, Int16(POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF))
        let argv: [UnsafeMutablePointer<CChar>?] = (["ssh"] + arguments).map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var child: pid_t = 0
        let status = posix_spawnp(&child, "ssh", &actions, &attributes, argv, environ)
        guard status == 0 else {
            throw .permanent("cannot run ssh for transport: openssh: \(String(cString: strerror(status))) "
                             + "(install the OpenSSH client, or use transport: libssh2)", code: "ssh_missing")
        }
        return child
    }

    // MARK: - The byte stream (the SFTP channel's I/O thread)

    func send(_ bytes: UnsafeRawBufferPointer) throws(StepError) -> Int {
        let n = Glibc.send(data, bytes.baseAddress, bytes.count, Int32(MSG_NOSIGNAL))
        if n >= 0 { return n }
        if errno == EAGAIN || errno == EINTR { return 0 }
        throw ended()
    }

    func receive(into buffer: UnsafeMutableRawBufferPointer) throws(StepError) -> Int {
        let n = recv(data, buffer.baseAddress, buffer.count, 0)
        if n > 0 { return n }
        if n < 0 && (errno == EAGAIN || errno == EINTR) { return 0 }
        throw ended()
    }

    func pollDescriptors(sending: Bool) -> [pollfd] {
        var descriptors = [pollfd(fd: data, events: Int16(POLLIN) | (sending ? Int16(POLLOUT) : 0), revents: 0)]
        let stderrFD = lock.withLock { self.stderrFD }
        if stderrFD >= 0 { descriptors.append(pollfd(fd: stderrFD, events: Int16(POLLIN), revents: 0)) }
        return descriptors
    }

    func serviced(_ descriptors: [pollfd]) {
        if descriptors.count > 1 && descriptors[1].revents != 0 { lock.withLock { readStderr() } }
    }

    /// ssh sends the keepalives itself (ServerAliveInterval).
    func idle() {}

    func established(_ step: StepContext) {
        let (fingerprint, type, added) = lock.withLock { () -> (String, String, Bool) in
            readStderr()
            return (reportedFingerprint, reportedKeyType, messages.contains { $0.hasPrefix("Warning: Permanently added") })
        }
        let name = KnownHosts.hostName(parameters.host, port: parameters.port)
        if parameters.policy == .off {
            step.log(.warn, "host key checking is off (host_key_policy: off): \(name) offered \(type) \(fingerprint), which was not verified")
        } else if added {
            step.log(.warn, "added \(name) (\(type) \(fingerprint)) to \(parameters.knownHosts)")
        }
    }

    // MARK: - Ending

    /// Closes our end (ssh sees end of file and says goodbye); if ssh is still there after a
    /// second (at once when not `graceful`), kills its process group. Always reaps it.
    func close(graceful: Bool) {
        Glibc.close(data)
        if exitStatus == nil && graceful { _ = awaitExit(within: 1) }
        if exitStatus == nil {
            kill(-pid, SIGKILL)
            var status: Int32 = 0
            while waitpid(pid, &status, 0) < 0 && errno == EINTR {}
            exitStatus = status
        }
        lock.withLock {
            if stderrFD >= 0 { Glibc.close(stderrFD); stderrFD = -1 }
        }
    }

    /// The error for a stream that ended: ssh exited (or is about to). Waits briefly for its last
    /// words and its exit, then says why, as precisely as ssh's messages allow.
    private func ended() -> StepError {
        if let failure { return failure }
        let deadline = Connection.now() + 2
        while Connection.now() < deadline {
            let open = lock.withLock { () -> Int32 in readStderr(); return stderrFD }
            if open < 0 { break }
            var descriptor = pollfd(fd: open, events: Int16(POLLIN), revents: 0)
            _ = poll(&descriptor, 1, 100)
        }
        let exited = awaitExit(within: 1)
        let (said, type, fingerprint) = lock.withLock { (messages, reportedKeyType, reportedFingerprint) }
        let error = OpenSSHTransport.classify(said, exitStatus: exited ? exitStatus : nil, keyType: type,
                                              fingerprint: fingerprint, parameters)
        failure = error
        return error
    }

    /// Polls for ssh's exit for up to `seconds`; true once it was reaped.
    private func awaitExit(within seconds: Double) -> Bool {
        if exitStatus != nil { return true }
        let deadline = Connection.now() + seconds
        while true {
            var status: Int32 = 0
            let result = waitpid(pid, &status, WNOHANG)
            if result == pid { exitStatus = status; return true }
            if result < 0 && errno != EINTR { exitStatus = -1; return true }  // not ours any more
            if Connection.now() >= deadline { return false }
            usleep(10_000)
        }
    }

    /// Reads what ssh wrote to stderr so far (called with `lock` held): keeps the fingerprint
    /// line and every message that is not debug output.
    private func readStderr() {
        guard stderrFD >= 0 else { return }
        var buffer = [UInt8](repeating: 0, count: 16 << 10)
        while true {
            let n = read(stderrFD, &buffer, buffer.count)
            if n < 0 && (errno == EAGAIN || errno == EINTR) { return }
            if n <= 0 {
                if !stderrLine.isEmpty { take(String(decoding: stderrLine, as: UTF8.self)) }
                stderrLine = []
                Glibc.close(stderrFD)
                stderrFD = -1
                return
            }
            for byte in buffer[..<n] {
                if byte == UInt8(ascii: "\n") {
                    take(String(decoding: stderrLine, as: UTF8.self))
                    stderrLine.removeAll(keepingCapacity: true)
                } else if byte != UInt8(ascii: "\r") && stderrLine.count < 4096 {
                    stderrLine.append(byte)
                }
            }
        }
    }

    private func take(_ line: String) {
        let hostKeyPrefix = "debug1: Server host key: "
        if line.hasPrefix(hostKeyPrefix) {
            // "debug1: Server host key: ssh-ed25519 SHA256:…" (the last one is the target's,
            // after any jump host's).
            let fields = line.dropFirst(hostKeyPrefix.count).split(separator: " ")
            if fields.count >= 2 {
                reportedKeyType = String(fields[0])
                reportedFingerprint = String(fields[1])
            }
            return
        }
        if line.hasPrefix("debug") || line.isEmpty { return }
        messages.append(line)
        if messages.count > 64 { messages.removeFirst(messages.count - 64) }
    }

    /// Why ssh ended, from what it said. Host-key and authentication refusals are permanent and
    /// worded as the libssh2 transport words them (same codes); the rest is a lost connection.
    static func classify(_ said: [String], exitStatus: Int32?, keyType: String, fingerprint: String,
                         _ p: ConnectionParameters) -> StepError {
        let name = KnownHosts.hostName(p.host, port: p.port)
        let text = said.filter { !$0.hasPrefix("@@@") && !$0.hasPrefix("Transferred:") && !$0.hasPrefix("Bytes per second") }
        let summary = text.suffix(6).joined(separator: " / ")
        func saidAny(_ phrases: String...) -> Bool { said.contains { line in phrases.contains { line.contains($0) } } }
        let key = fingerprint.isEmpty ? "an unknown key" : "\(keyType) \(fingerprint)"
        if saidAny("REVOKED HOST KEY", "is marked as revoked") {
            return .permanent("the host key of \(name) (\(key)) is marked @revoked in \(p.knownHosts)", code: "host_key_revoked")
        }
        if saidAny("REMOTE HOST IDENTIFICATION HAS CHANGED", "has changed and you have requested strict checking") {
            if fingerprint.isEmpty {
                return .permanent("host key verification failed on the way to \(name): \(summary)", code: "host_key_changed")
            }
            return .permanent("""
                REMOTE HOST IDENTIFICATION HAS CHANGED for \(name): it offered \(key), which differs from the key \
                recorded in \(p.knownHosts); refusing (someone may be intercepting the connection; if the key \
                really changed, update known_hosts)
                """, code: "host_key_changed")
        }
        if saidAny("Host key verification failed", "host key is known for") {
            if fingerprint.isEmpty {
                // ssh never saw the target's key: a jump host's was refused (by the ssh_config's rules).
                return .permanent("host key verification failed on the way to \(name): \(summary)", code: "host_key_unknown")
            }
            return .permanent("""
                host key verification failed: \(name) is not in \(p.knownHosts); its \(key) key fingerprint is \
                \(fingerprint.isEmpty ? "unknown" : fingerprint) (check it, then add it to known_hosts or use \
                host_key_policy: accept-new)
                """, code: "host_key_unknown")
        }
        if saidAny("Permission denied (", "Too many authentication failures") {
            return .permanent("authentication as \(p.user) failed: \(summary) "
                              + "(check user, key_file, the agent, or the ssh config)", code: "auth_failed")
        }
        if saidAny("Can't open user config file", "Bad configuration option", "bad configuration options",
                   "Unsupported option", "no argument after keyword", "Bad key types") {
            return .invalidInput("ssh refused its configuration: \(summary) (check ssh_config and proxy_jump)", code: "ssh_config")
        }
        if saidAny("subsystem request failed") {
            return .permanent("\(name) offers no SFTP subsystem: \(summary)", code: "sftp_unavailable")
        }
        if saidAny("Could not resolve hostname", "Connection refused", "Connection timed out", "No route to host",
                   "Network is unreachable", "Connection closed by UNKNOWN") {
            return .retryable("cannot connect to \(name): \(summary)", code: "unreachable")
        }
        let how: String
        if let status = exitStatus, status >= 0 {
            how = status & 0x7f == 0 ? "ssh exited with status \((status >> 8) & 0xff)" : "ssh was killed by signal \(status & 0x7f)"
        } else {
            how = "ssh closed the SFTP stream"
        }
        return .retryable("connection to \(name) lost: \(how)\(summary.isEmpty ? "" : ": \(summary)")", code: "connection_lost")
    }
}
