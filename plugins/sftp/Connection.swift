#if canImport(Glibc)
import Glibc
#endif
import CLibSSH2
import OrchestratePluginKit

/// One SSH connection with its SFTP channel, driven in libssh2's non-blocking mode: every call
/// that would block returns EAGAIN and we poll the socket *and* the step's cancel fd, so a
/// cancel reaches a stalled transfer within a poll round (≤ 1 s, usually at once), keepalives
/// go out while idle, and a silent peer is declared dead after `ioTimeout`.
///
/// Not thread-safe (libssh2 sessions are not): one thread uses it at a time; the session pool
/// hands it out exclusively.
final class Connection: @unchecked Sendable {
    let parameters: ConnectionParameters
    private(set) var fingerprint = ""
    private let socket: Int32
    private let session: OpaquePointer
    private(set) var sftp: OpaquePointer!
    /// The step currently using the connection (for cancellation); set by the pool.
    var step: StepContext?
    /// Set once an I/O error was seen: the connection is not reused.
    private(set) var broken = false
    private var lastActivity = Connection.now()

    private static let initialised: Bool = { libssh2_init(0) == 0 }()

    init(_ parameters: ConnectionParameters, step: StepContext) throws(StepError) {
        _ = Connection.initialised
        self.parameters = parameters
        self.step = step
        socket = try Connection.connectSocket(parameters, step: step)
        guard let session = libssh2_session_init_ex(nil, nil, nil, nil) else {
            close(socket)
            throw .permanent("libssh2 could not create a session")
        }
        self.session = session
        libssh2_session_set_blocking(session, 0)
        do {
            try open()
        } catch {
            shutdown()
            throw error
        }
    }

    deinit { shutdown() }

    private func open() throws(StepError) {
        let sock = socket
        // Fastest first: libssh2 1.10 has no AEAD ciphers, so AES-CTR (AES-NI) with the
        // cheapest strong MAC (SHA-1/SHA-256 have CPU instructions here) instead of its defaults.
        _ = libssh2_session_method_pref(session, LIBSSH2_METHOD_CRYPT_CS, "aes128-ctr,aes256-ctr,aes192-ctr,aes256-cbc,aes128-cbc")
        _ = libssh2_session_method_pref(session, LIBSSH2_METHOD_CRYPT_SC, "aes128-ctr,aes256-ctr,aes192-ctr,aes256-cbc,aes128-cbc")
        _ = libssh2_session_method_pref(session, LIBSSH2_METHOD_MAC_CS, "hmac-sha1,hmac-sha2-256,hmac-sha2-512")
        _ = libssh2_session_method_pref(session, LIBSSH2_METHOD_MAC_SC, "hmac-sha1,hmac-sha2-256,hmac-sha2-512")
        try call("SSH handshake") { libssh2_session_handshake(session, sock) }
        try verifyHostKey()
        try authenticate()
        if parameters.keepalive > 0 { libssh2_keepalive_config(session, 1, UInt32(parameters.keepalive)) }
        sftp = try pointer("SFTP start") { libssh2_sftp_init(session) }
    }

    private var closed = false

    /// Closes the SFTP channel and the session (best effort, bounded: the socket goes away after).
    func shutdown() {
        guard !closed else { return }
        closed = true
        if !broken {
            let deadline = Connection.now() + 1
            if let sftp { while libssh2_sftp_shutdown(sftp) == LIBSSH2_ERROR_EAGAIN && Connection.now() < deadline { pollOnce(100) } }
            while libssh2_session_disconnect_ex(session, SSH_DISCONNECT_BY_APPLICATION, "bye", "") == LIBSSH2_ERROR_EAGAIN
                    && Connection.now() < deadline { pollOnce(100) }
        }
        libssh2_session_free(session)
        close(socket)
    }

    // MARK: - Host key and authentication

    private func verifyHostKey() throws(StepError) {
        var length = 0
        var type: Int32 = 0
        guard let raw = libssh2_session_hostkey(session, &length, &type) else {
            throw .retryable("the server sent no host key", code: "no_host_key")
        }
        let key = raw.withMemoryRebound(to: UInt8.self, capacity: length) { Array(UnsafeBufferPointer(start: $0, count: length)) }
        fingerprint = KnownHosts.fingerprint(key)
        let p = parameters
        let name = KnownHosts.hostName(p.host, port: p.port)
        if p.policy == .off {
            step?.log(.warn, "host key checking is off (host_key_policy: off): \(name) offered \(KnownHosts.keyType(key)) \(fingerprint), which was not verified")
            return
        }
        let knownHosts = KnownHosts(path: p.knownHosts)
        switch knownHosts.check(host: p.host, port: p.port, key: key) {
        case .known:
            return
        case .revoked:
            throw .permanent("the host key of \(name) (\(KnownHosts.keyType(key)) \(fingerprint)) is marked @revoked in \(p.knownHosts)",
                             code: "host_key_revoked")
        case .changed:
            throw .permanent("""
                REMOTE HOST IDENTIFICATION HAS CHANGED for \(name): it offered \(KnownHosts.keyType(key)) \(fingerprint), \
                which differs from the key recorded in \(p.knownHosts); refusing (someone may be intercepting the \
                connection; if the key really changed, update known_hosts)
                """, code: "host_key_changed")
        case .unknown:
            if p.policy == .acceptNew {
                try knownHosts.add(host: p.host, port: p.port, key: key)
                step?.log(.warn, "added \(name) (\(KnownHosts.keyType(key)) \(fingerprint)) to \(p.knownHosts)")
                return
            }
            throw .permanent("""
                host key verification failed: \(name) is not in \(p.knownHosts); its \(KnownHosts.keyType(key)) key \
                fingerprint is \(fingerprint) (check it, then add it to known_hosts or use host_key_policy: accept-new)
                """, code: "host_key_unknown")
        }
    }

    private func authenticate() throws(StepError) {
        let p = parameters
        let user = p.user
        let userLength = UInt32(user.utf8.count)
        var reasons: [String] = []
        if let keyFile = p.keyFile {
            do {
                try call("public-key auth with \(keyFile)") {
                    libssh2_userauth_publickey_fromfile_ex(session, user, userLength, nil, keyFile, p.passphrase)
                }
                return
            } catch { reasons.append(error.message) }
        }
        if let password = p.password {
            do {
                try call("password auth") {
                    libssh2_userauth_password_ex(session, user, userLength, password, UInt32(password.utf8.count), nil)
                }
                return
            } catch { reasons.append(error.message) }
        }
        if p.agent {
            if authenticateWithAgent() { return }
            reasons.append("no identity in ssh-agent was accepted")
        }
        throw .permanent("authentication as \(user) failed: " + reasons.joined(separator: "; "), code: "auth_failed")
    }

    /// The agent API blocks (it talks to a local socket), so it runs with blocking mode on.
    private func authenticateWithAgent() -> Bool {
        libssh2_session_set_blocking(session, 1)
        defer { libssh2_session_set_blocking(session, 0) }
        guard let agent = libssh2_agent_init(session) else { return false }
        defer { libssh2_agent_disconnect(agent); libssh2_agent_free(agent) }
        guard libssh2_agent_connect(agent) == 0, libssh2_agent_list_identities(agent) == 0 else { return false }
        var previous: UnsafeMutablePointer<libssh2_agent_publickey>?
        var identity: UnsafeMutablePointer<libssh2_agent_publickey>?
        while libssh2_agent_get_identity(agent, &identity, previous) == 0 {
            if libssh2_agent_userauth(agent, parameters.user, identity) == 0 { return true }
            previous = identity
        }
        return false
    }

    // MARK: - Non-blocking calls

    /// Repeats `body` while it returns EAGAIN, waiting on the socket between tries. Returns the
    /// first non-negative result; a negative one becomes a StepError naming `what`.
    @discardableResult
    func call<T: BinaryInteger>(_ what: @autoclosure () -> String, _ body: () -> T) throws(StepError) -> T {
        while true {
            let result = body()
            if result >= 0 { lastActivity = Connection.now(); return result }
            if Int32(truncatingIfNeeded: result) != LIBSSH2_ERROR_EAGAIN { throw failure(what(), Int32(truncatingIfNeeded: result)) }
            try waitOrAbandon()
        }
    }

    /// Like `call` for libssh2 functions returning a pointer (NULL + EAGAIN means try again).
    func pointer(_ what: @autoclosure () -> String, _ body: () -> OpaquePointer?) throws(StepError) -> OpaquePointer {
        while true {
            if let result = body() { lastActivity = Connection.now(); return result }
            let code = libssh2_session_last_errno(session)
            if code != LIBSSH2_ERROR_EAGAIN { throw failure(what(), code) }
            try waitOrAbandon()
        }
    }

    /// `wait()` for a call libssh2 has half done. If the wait ends the call (cancel, timeout), the
    /// session is left mid-operation: libssh2 1.10 keeps one pending state per operation kind
    /// (the next `stat` would take the abandoned one's reply, for another path) and possibly a
    /// half-sent packet that the next write would complete with its own length. Such a connection
    /// must never be reused, so it counts as broken (a retried attempt gets a fresh one).
    private func waitOrAbandon() throws(StepError) {
        do {
            try wait()
        } catch {
            broken = true
            throw error
        }
    }

    /// Waits until libssh2's socket is ready in the direction it needs, the step is cancelled,
    /// or a second passes (then sends a keepalive if due and checks the I/O timeout).
    func wait() throws(StepError) {
        if let step, step.isCancelled { throw .cancelled("sftp transfer cancelled") }
        let directions = libssh2_session_block_directions(session)
        var events: Int16 = 0
        if directions & LIBSSH2_SESSION_BLOCK_INBOUND != 0 { events |= Int16(POLLIN) }
        if directions & LIBSSH2_SESSION_BLOCK_OUTBOUND != 0 { events |= Int16(POLLOUT) }
        if events == 0 { events = Int16(POLLIN) }
        var fds = [pollfd(fd: socket, events: events, revents: 0)]
        if let step { fds.append(pollfd(fd: step.cancelFD, events: Int16(POLLIN), revents: 0)) }
        let ready = poll(&fds, nfds_t(fds.count), 1000)
        if fds.count > 1 && fds[1].revents != 0 { throw .cancelled("sftp transfer cancelled") }
        if ready > 0 && fds[0].revents != 0 { return }
        if parameters.keepalive > 0 {
            var next: Int32 = 0
            _ = libssh2_keepalive_send(session, &next)
        }
        if Connection.now() - lastActivity > Double(parameters.ioTimeout) {
            broken = true
            throw StepError(kind: .timeout, code: "io_timeout",
                            message: "no progress from \(parameters.host) for \(parameters.ioTimeout) s")
        }
    }

    private func pollOnce(_ ms: Int32) {
        var fd = pollfd(fd: socket, events: Int16(POLLIN | POLLOUT), revents: 0)
        _ = poll(&fd, 1, ms)
    }

    /// Turns a libssh2 error code into a StepError: SFTP status codes map to their meaning
    /// (no such file: permanent), socket/transport failures are retryable and break the connection.
    func failure(_ what: String, _ code: Int32) -> StepError {
        if code == LIBSSH2_ERROR_SFTP_PROTOCOL, let sftp {
            let status = libssh2_sftp_last_error(sftp)
            return SFTPStatus.error(what, status: status)
        }
        var message: UnsafeMutablePointer<CChar>?
        var length: Int32 = 0
        libssh2_session_last_error(session, &message, &length, 0)
        let text = message.map { String(cString: $0) } ?? "libssh2 error \(code)"
        switch code {
        case LIBSSH2_ERROR_AUTHENTICATION_FAILED, LIBSSH2_ERROR_PUBLICKEY_UNVERIFIED, LIBSSH2_ERROR_FILE:
            return .permanent("\(what): \(text)", code: "auth_failed")
        case LIBSSH2_ERROR_SOCKET_SEND, LIBSSH2_ERROR_SOCKET_RECV, LIBSSH2_ERROR_SOCKET_DISCONNECT,
             LIBSSH2_ERROR_SOCKET_TIMEOUT, LIBSSH2_ERROR_TIMEOUT, LIBSSH2_ERROR_CHANNEL_CLOSED,
             LIBSSH2_ERROR_CHANNEL_EOF_SENT, LIBSSH2_ERROR_KEX_FAILURE, LIBSSH2_ERROR_BANNER_RECV:
            broken = true
            return .retryable("\(what): connection to \(parameters.host) lost (\(text))", code: "connection_lost")
        default:
            broken = true
            return .retryable("\(what): \(text) (libssh2 \(code))", code: "ssh_\(-code)")
        }
    }

    // MARK: - Socket

    private static func connectSocket(_ p: ConnectionParameters, step: StepContext) throws(StepError) -> Int32 {
        var hints = addrinfo()
        hints.ai_socktype = Int32(SOCK_STREAM.rawValue)
        var list: UnsafeMutablePointer<addrinfo>?
        let status = getaddrinfo(p.host, String(p.port), &hints, &list)
        guard status == 0, let list else {
            throw .retryable("cannot resolve \(p.host): \(String(cString: gai_strerror(status)))", code: "unreachable")
        }
        defer { freeaddrinfo(list) }
        var lastError = ECONNREFUSED
        var entry: UnsafeMutablePointer<addrinfo>? = list
        while let a = entry {
            entry = a.pointee.ai_next
            let fd = Glibc.socket(a.pointee.ai_family, a.pointee.ai_socktype | Int32(SOCK_CLOEXEC.rawValue), a.pointee.ai_protocol)
            if fd < 0 { lastError = errno; continue }
            _ = fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK)
            var one: Int32 = 1
            setsockopt(fd, Int32(IPPROTO_TCP), TCP_NODELAY, &one, socklen_t(MemoryLayout<Int32>.size))
            var size: Int32 = 4 << 20
            setsockopt(fd, SOL_SOCKET, SO_SNDBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &size, socklen_t(MemoryLayout<Int32>.size))
            if Glibc.connect(fd, a.pointee.ai_addr, a.pointee.ai_addrlen) == 0 { return fd }
            guard errno == EINPROGRESS else { lastError = errno; close(fd); continue }
            let deadline = now() + Double(p.connectTimeout)
            while true {
                var fds = [pollfd(fd: fd, events: Int16(POLLOUT), revents: 0),
                           pollfd(fd: step.cancelFD, events: Int16(POLLIN), revents: 0)]
                _ = poll(&fds, 2, 200)
                if fds[1].revents != 0 || step.isCancelled { close(fd); throw .cancelled("connect cancelled") }
                if fds[0].revents != 0 {
                    var soError: Int32 = 0
                    var len = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &len)
                    if soError == 0 { return fd }
                    lastError = soError
                    break
                }
                if now() > deadline { lastError = ETIMEDOUT; break }
            }
            close(fd)
        }
        throw .retryable("cannot connect to \(p.host):\(p.port): \(String(cString: strerror(lastError)))", code: "unreachable")
    }

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
