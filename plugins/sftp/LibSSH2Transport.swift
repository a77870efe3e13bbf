#if canImport(Glibc)
import Glibc
#endif
import CLibSSH2
import OrchestratePluginKit

/// The SSH connection made in this process with libssh2 (the default transport): the socket,
/// libssh2's session (handshake, host-key check against `known_hosts` by `KnownHosts`,
/// authentication) and the channel running the SFTP subsystem. Until the channel is open the
/// creating thread drives libssh2 in non-blocking mode, polling the socket *and* the step's
/// cancel fd so a cancel or a silent server ends the wait; from then on the SFTP channel's I/O
/// thread makes every libssh2 call (sessions are not thread-safe).
final class LibSSH2Transport: SSHTransport {
    let parameters: ConnectionParameters
    private(set) var fingerprint = ""
    private let socket: Int32
    private let session: OpaquePointer
    private var sshChannel: OpaquePointer!
    private var lastActivity = Connection.now()
    private let keepalive: Bool

    private static let initialised: Bool = { libssh2_init(0) == 0 }()

    init(_ parameters: ConnectionParameters, step: StepContext) throws(StepError) {
        _ = LibSSH2Transport.initialised
        self.parameters = parameters
        keepalive = parameters.keepalive > 0
        socket = try LibSSH2Transport.connectSocket(parameters, step: step)
        guard let session = libssh2_session_init_ex(nil, nil, nil, nil) else {
            Glibc.close(socket)
            throw .permanent("libssh2 could not create a session")
        }
        self.session = session
        libssh2_session_set_blocking(session, 0)
        do {
            try open(step)
        } catch {
            // The session is left mid-operation: no polite goodbye.
            close(graceful: false)
            throw error
        }
    }

    private func open(_ step: StepContext) throws(StepError) {
        let sock = socket
        // Fastest first: libssh2 1.10 has no AEAD ciphers, so AES-CTR (AES-NI) with the
        // cheapest strong MAC (SHA-1/SHA-256 have CPU instructions here) instead of its defaults.
        _ = libssh2_session_method_pref(session, LIBSSH2_METHOD_CRYPT_CS, "aes128-ctr,aes256-ctr,aes192-ctr,aes256-cbc,aes128-cbc")
        _ = libssh2_session_method_pref(session, LIBSSH2_METHOD_CRYPT_SC, "aes128-ctr,aes256-ctr,aes192-ctr,aes256-cbc,aes128-cbc")
        _ = libssh2_session_method_pref(session, LIBSSH2_METHOD_MAC_CS, "hmac-sha1,hmac-sha2-256,hmac-sha2-512")
        _ = libssh2_session_method_pref(session, LIBSSH2_METHOD_MAC_SC, "hmac-sha1,hmac-sha2-256,hmac-sha2-512")
        try call("SSH handshake", step) { libssh2_session_handshake(session, sock) }
        try verifyHostKey(step)
        try authenticate(step)
        // No reply wanted: libssh2 would keep every reply in its packet list for good.
        if parameters.keepalive > 0 { libssh2_keepalive_config(session, 0, UInt32(parameters.keepalive)) }
        // A receive window far above libssh2's 2 MiB default, so pipelined reads are not held
        // back by window adjustments.
        let ssh = try pointer("SFTP channel", step) {
            libssh2_channel_open_ex(session, "session", 7, 16 << 20, UInt32(LIBSSH2_CHANNEL_PACKET_DEFAULT), nil, 0)
        }
        sshChannel = ssh
        try call("SFTP subsystem", step) { libssh2_channel_process_startup(ssh, "subsystem", 9, "sftp", 4) }
        // The server's stderr is dropped as it comes (unread, it would fill the window).
        try call("SFTP channel setup", step) { libssh2_channel_handle_extended_data2(ssh, LIBSSH2_CHANNEL_EXTENDED_DATA_IGNORE) }
    }

    private var closed = false

    func close(graceful: Bool) {
        guard !closed else { return }
        closed = true
        if graceful {
            let deadline = Connection.now() + 1
            if let sshChannel {
                while libssh2_channel_close(sshChannel) == LIBSSH2_ERROR_EAGAIN && Connection.now() < deadline { pollOnce(100) }
            }
            while libssh2_session_disconnect_ex(session, SSH_DISCONNECT_BY_APPLICATION, "bye", "") == LIBSSH2_ERROR_EAGAIN
                    && Connection.now() < deadline { pollOnce(100) }
        }
        if let sshChannel { libssh2_channel_free(sshChannel) }
        libssh2_session_free(session)
        Glibc.close(socket)
    }

    func established(_ step: StepContext) {}

    // MARK: - The byte stream (the SFTP channel's I/O thread)

    /// Which call last stopped with a packet half sent: in non-blocking mode it must be repeated
    /// before any other call sends (libssh2 1.10 would otherwise complete the old packet in the
    /// new caller's name), so the other direction reports "nothing now" meanwhile.
    private enum Pending { case none, read, write }
    private var pending = Pending.none

    func send(_ bytes: UnsafeRawBufferPointer) throws(StepError) -> Int {
        if pending == .read { return 0 }
        let n = libssh2_channel_write_ex(sshChannel, 0, bytes.baseAddress!.assumingMemoryBound(to: CChar.self), bytes.count)
        if n == Int(LIBSSH2_ERROR_EAGAIN) {
            pending = outboundBlocked ? .write : .none
            return 0
        }
        if n < 0 { throw lost("send", Int32(truncatingIfNeeded: n)) }
        pending = .none
        return n  // 0: no window, wait for the server's adjustment
    }

    func receive(into buffer: UnsafeMutableRawBufferPointer) throws(StepError) -> Int {
        if pending == .write { return 0 }
        let n = libssh2_channel_read_ex(sshChannel, 0, buffer.baseAddress!.assumingMemoryBound(to: CChar.self), buffer.count)
        if n == Int(LIBSSH2_ERROR_EAGAIN) {
            pending = outboundBlocked ? .read : .none
            return 0
        }
        if n < 0 { throw lost("receive", Int32(truncatingIfNeeded: n)) }
        // A read that returns data may still have left a reply of libssh2's own (to a server
        // request) half sent: the next call must be a read then.
        pending = outboundBlocked ? .read : .none
        if n == 0 && libssh2_channel_eof(sshChannel) != 0 {
            throw .retryable("\(parameters.host) closed the SFTP channel", code: "connection_lost")
        }
        return n
    }

    func pollDescriptors(sending: Bool) -> [pollfd] {
        var events = Int16(POLLIN)
        if pending != .none || outboundBlocked { events |= Int16(POLLOUT) }
        return [pollfd(fd: socket, events: events, revents: 0)]
    }

    func serviced(_ descriptors: [pollfd]) {}

    /// A keepalive is only sent when the socket can take it whole: libssh2 keeps a keepalive it
    /// could not send as a half-sent packet that the next channel write would trip over.
    func idle() {
        guard keepalive && pending == .none && socketWritable() else { return }
        var next: Int32 = 0
        _ = libssh2_keepalive_send(session, &next)
    }

    private var outboundBlocked: Bool { libssh2_session_block_directions(session) & LIBSSH2_SESSION_BLOCK_OUTBOUND != 0 }

    private func socketWritable() -> Bool {
        var fd = pollfd(fd: socket, events: Int16(POLLOUT), revents: 0)
        return poll(&fd, 1, 0) == 1 && fd.revents & Int16(POLLOUT) != 0
    }

    private func lost(_ what: String, _ code: Int32) -> StepError {
        var message: UnsafeMutablePointer<CChar>?
        var length: Int32 = 0
        libssh2_session_last_error(session, &message, &length, 0)
        let text = message.map { String(cString: $0) } ?? "libssh2 error \(code)"
        return .retryable("SFTP \(what): connection to \(parameters.host) lost (\(text))", code: "connection_lost")
    }

    // MARK: - Host key and authentication

    private func verifyHostKey(_ step: StepContext) throws(StepError) {
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
            step.log(.warn, "host key checking is off (host_key_policy: off): \(name) offered \(KnownHosts.keyType(key)) \(fingerprint), which was not verified")
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
                step.log(.warn, "added \(name) (\(KnownHosts.keyType(key)) \(fingerprint)) to \(p.knownHosts)")
                return
            }
            throw .permanent("""
                host key verification failed: \(name) is not in \(p.knownHosts); its \(KnownHosts.keyType(key)) key \
                fingerprint is \(fingerprint) (check it, then add it to known_hosts or use host_key_policy: accept-new)
                """, code: "host_key_unknown")
        }
    }

    private func authenticate(_ step: StepContext) throws(StepError) {
        let p = parameters
        let user = p.user
        let userLength = UInt32(user.utf8.count)
        var reasons: [String] = []
        if let keyFile = p.keyFile {
            do {
                try call("public-key auth with \(keyFile)", step) {
                    libssh2_userauth_publickey_fromfile_ex(session, user, userLength, nil, keyFile, p.passphrase)
                }
                return
            } catch { reasons.append(error.message) }
        }
        if let password = p.password {
            do {
                try call("password auth", step) {
                    libssh2_userauth_password_ex(session, user, userLength, password, UInt32(password.utf8.count), nil)
                }
                return
            } catch { reasons.append(error.message) }
        }
        if p.agent {
            if authenticateWithAgent() { return }
            reasons.append("no identity in ssh-agent was accepted")
        }
        throw .permanent("authentication as \(user) failed: " + reasons.joined(separator: "; ")
            + " (check user, and key_file with its passphrase, password or agent)", code: "auth_failed")
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

    // MARK: - Non-blocking calls (while opening)

    /// Repeats `body` while it returns EAGAIN, waiting on the socket between tries. Returns the
    /// first non-negative result; a negative one becomes a StepError naming `what`.
    @discardableResult
    private func call<T: BinaryInteger>(_ what: @autoclosure () -> String, _ step: StepContext,
                                        _ body: () -> T) throws(StepError) -> T {
        while true {
            let result = body()
            if result >= 0 { lastActivity = Connection.now(); return result }
            if Int32(truncatingIfNeeded: result) != LIBSSH2_ERROR_EAGAIN { throw failure(what(), Int32(truncatingIfNeeded: result)) }
            try wait(step)
        }
    }

    /// Like `call` for libssh2 functions returning a pointer (NULL + EAGAIN means try again).
    private func pointer(_ what: @autoclosure () -> String, _ step: StepContext, _ body: () -> OpaquePointer?) throws(StepError) -> OpaquePointer {
        while true {
            if let result = body() { lastActivity = Connection.now(); return result }
            let code = libssh2_session_last_errno(session)
            if code != LIBSSH2_ERROR_EAGAIN { throw failure(what(), code) }
            try wait(step)
        }
    }

    /// Waits until libssh2's socket is ready in the direction it needs, the step is cancelled,
    /// or a second passes (then checks the I/O timeout). A wait that ends the call leaves the
    /// session mid-operation: the connection is given up (`init` shuts it down).
    private func wait(_ step: StepContext) throws(StepError) {
        if step.isCancelled { throw .cancelled("sftp connect cancelled") }
        let directions = libssh2_session_block_directions(session)
        var events: Int16 = 0
        if directions & LIBSSH2_SESSION_BLOCK_INBOUND != 0 { events |= Int16(POLLIN) }
        if directions & LIBSSH2_SESSION_BLOCK_OUTBOUND != 0 { events |= Int16(POLLOUT) }
        if events == 0 { events = Int16(POLLIN) }
        var fds = [pollfd(fd: socket, events: events, revents: 0), pollfd(fd: step.cancelFD, events: Int16(POLLIN), revents: 0)]
        let ready = poll(&fds, 2, 1000)
        if fds[1].revents != 0 { throw .cancelled("sftp connect cancelled") }
        if ready > 0 && fds[0].revents != 0 { return }
        if Connection.now() - lastActivity > Double(parameters.ioTimeout) {
            throw StepError(kind: .timeout, code: "io_timeout",
                            message: "no progress from \(parameters.host) for \(parameters.ioTimeout) s")
        }
    }

    private func pollOnce(_ ms: Int32) {
        var fd = pollfd(fd: socket, events: Int16(POLLIN | POLLOUT), revents: 0)
        _ = poll(&fd, 1, ms)
    }

    /// Turns a libssh2 error code into a StepError: authentication refusals are permanent,
    /// transport failures retryable.
    private func failure(_ what: String, _ code: Int32) -> StepError {
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
            return .retryable("\(what): connection to \(parameters.host) lost (\(text))", code: "connection_lost")
        default:
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
            guard errno == EINPROGRESS else { lastError = errno; Glibc.close(fd); continue }
            let deadline = Connection.now() + Double(p.connectTimeout)
            while true {
                var fds = [pollfd(fd: fd, events: Int16(POLLOUT), revents: 0),
                           pollfd(fd: step.cancelFD, events: Int16(POLLIN), revents: 0)]
                _ = poll(&fds, 2, 200)
                if fds[1].revents != 0 || step.isCancelled { Glibc.close(fd); throw .cancelled("connect cancelled") }
                if fds[0].revents != 0 {
                    var soError: Int32 = 0
                    var len = socklen_t(MemoryLayout<Int32>.size)
                    getsockopt(fd, SOL_SOCKET, SO_ERROR, &soError, &len)
                    if soError == 0 { return fd }
                    lastError = soError
                    break
                }
                if Connection.now() > deadline { lastError = ETIMEDOUT; break }
            }
            Glibc.close(fd)
        }
        throw .retryable("cannot connect to \(p.host):\(p.port): \(String(cString: strerror(lastError)))", code: "unreachable")
    }
}
