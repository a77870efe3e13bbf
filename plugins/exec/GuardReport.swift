#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif
import OrchestratePluginKit

/// What `orchestrate-exec-guard` says on its report pipe (descriptor 4) before the command
/// runs: records of two native int32s, a tag and a value — 'P' the command's pid, 'E' the errno
/// of its failed execve, 'S' the errno of the guard's own failed setup. End of file means the
/// command was exec'd (its copy of the pipe closed on exec) or the guard is gone.
struct GuardReport {
    var commandPID: pid_t?
    var execErrno: Int32?
    var setupErrno: Int32?

    /// Reads `fd` (blocking) to end of file.
    static func receive(from fd: Int32) -> GuardReport {
        var bytes: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 64)
        while true {
            let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if count > 0 { bytes += buffer[..<count]; continue }
            if count < 0 && errno == EINTR { continue }
            break
        }
        var report = GuardReport()
        var offset = 0
        while offset + 8 <= bytes.count {
            let (tag, value) = bytes.withUnsafeBytes {
                ($0.loadUnaligned(fromByteOffset: offset, as: Int32.self), $0.loadUnaligned(fromByteOffset: offset + 4, as: Int32.self))
            }
            switch UInt8(truncatingIfNeeded: tag) {
            case UInt8(ascii: "P"): report.commandPID = value
            case UInt8(ascii: "E"): report.execErrno = value
            case UInt8(ascii: "S"): report.setupErrno = value
            default: break
            }
            offset += 8
        }
        return report
    }

    /// The step's error when the command did not start, else nil. A command that cannot be
    /// exec'd is invalid input, as posix_spawn's own failure was before the guard existed.
    func failure(executable: String) -> StepError? {
        if let code = execErrno {
            let reason = String(cString: strerror(code))
            if code == ENOENT || code == EACCES || code == ENOEXEC {
                return .invalidInput("cannot run \(executable): \(reason)", code: "command_not_runnable")
            }
            return .posix("cannot start \(executable)", errno: code)
        }
        if let code = setupErrno {
            return .posix("the exec guard could not start \(executable)", errno: code)
        }
        if commandPID == nil {
            return .permanent("the exec guard ended before it started \(executable)", code: "guard_failed")
        }
        return nil
    }
}
