#if canImport(Glibc)
import Glibc
#endif
import OrchestratePluginKit

/// One SFTP connection: an SSH transport (libssh2 in this process, or the system's `ssh`; see
/// `SSHTransport`) and the SFTP channel over its byte stream, through which any number of threads
/// may send SFTP requests at once.
final class Connection: @unchecked Sendable {
    let parameters: ConnectionParameters
    var fingerprint: String { transport.fingerprint }
    private let transport: any SSHTransport
    /// The SFTP requests of every user of this connection go through here.
    let channel: SFTPChannel
    /// SFTP extensions the server announced (`posix-rename@openssh.com`, `fsync@openssh.com`…).
    private(set) var extensions: [String: [UInt8]] = [:]
    /// Largest data per READ / WRITE request: the server's `limits@openssh.com`, else the 32 KiB
    /// every SFTP server must accept.
    private(set) var maximumRead = 32 << 10
    private(set) var maximumWrite = 32 << 10

    /// Broken connections are never reused: every request on one fails at once.
    var broken: Bool { channel.broken }

    init(_ parameters: ConnectionParameters, step: StepContext) throws(StepError) {
        self.parameters = parameters
        try parameters.checkFiles()
        switch parameters.transport {
        case .libssh2: transport = try LibSSH2Transport(parameters, step: step)
        case .openssh: transport = try OpenSSHTransport(parameters, step: step)
        }
        channel = SFTPChannel(transport: transport, parameters: parameters)
        do {
            try open(step)
        } catch {
            channel.stop()
            transport.close(graceful: false)
            closed = true
            throw error
        }
    }

    deinit { shutdown() }

    func supports(_ extensionName: String) -> Bool { extensions[extensionName] != nil }

    private func open(_ step: StepContext) throws(StepError) {
        extensions = try channel.start(step)
        transport.established(step)
        if supports("limits@openssh.com") {
            var reply = try channel.call(.extended, step) { $0.string("limits@openssh.com") }
            if reply.type == SFTP.Packet.extendedReply.rawValue {
                _ = try reply.reader.u64()
                let read = Int(try reply.reader.u64()), write = Int(try reply.reader.u64())
                if read > 0 { maximumRead = min(read, 255 << 10) }
                if write > 0 { maximumWrite = min(write, 255 << 10) }
            }
        }
    }

    private var closed = false

    /// Stops the I/O thread, then ends the transport (politely if it is still good, bounded).
    func shutdown() {
        guard !closed else { return }
        closed = true
        let graceful = !broken
        channel.stop()
        transport.close(graceful: graceful)
    }

    static func now() -> Double {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return Double(ts.tv_sec) + Double(ts.tv_nsec) / 1e9
    }
}
