#if canImport(Glibc)
import Glibc
#endif
import OrchestratePluginKit

/// An authenticated SSH connection whose SFTP subsystem is a non-blocking, ordered byte stream:
/// all `SFTPChannel` needs. Two kinds: libssh2 in this process (`LibSSH2Transport`), or the
/// system's `ssh -s sftp` as a child process speaking over a socket (`OpenSSHTransport`).
///
/// `send`, `receive`, `pollDescriptors`, `serviced` and `idle` are called by the channel's I/O
/// thread only; `close` after that thread stopped.
protocol SSHTransport: AnyObject {
    /// The server's host key as `ssh-keygen -l` prints it (SHA256:…), once known.
    var fingerprint: String { get }

    /// Sends up to `bytes.count` bytes; returns how many were taken, 0 when none can be now.
    /// Throws when the connection is lost.
    func send(_ bytes: UnsafeRawBufferPointer) throws(StepError) -> Int

    /// Receives up to `buffer.count` bytes; returns how many, 0 when none are there now. Throws
    /// at the end of the stream or when the connection is lost.
    func receive(into buffer: UnsafeMutableRawBufferPointer) throws(StepError) -> Int

    /// What to wait on until the stream can make progress; `sending` says a request is waiting
    /// to go out. The channel adds its own wake-up descriptor after these.
    func pollDescriptors(sending: Bool) -> [pollfd]

    /// Called after each wait with the descriptors `pollDescriptors` returned, their `revents` set.
    func serviced(_ descriptors: [pollfd])

    /// Called on every turn of the I/O loop that found nothing to do (keepalives).
    func idle()

    /// Logs what the step should know about the connection once SFTP is up (host key checking off,
    /// a key recorded under accept-new).
    func established(_ step: StepContext)

    /// Ends the connection: politely (bounded by a second) when `graceful`, at once otherwise.
    func close(graceful: Bool)
}
