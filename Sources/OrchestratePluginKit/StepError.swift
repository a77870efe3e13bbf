#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// How a step fails: the kind tells the scheduler whether to try again.
///
/// ```swift
/// throw StepError.invalidInput("source \(path) is a directory")
/// throw StepError.retryable("server busy", code: "http_503", retryAfter: .seconds(30))
/// throw StepError.posix("cannot open \(path)")          // errno → code "ENOENT", kind by errno
/// ```
public struct StepError: Error, Sendable, Equatable, CustomStringConvertible {
    /// The `ORC_ERROR_*` kinds.
    public enum Kind: Int32, Sendable {
        /// Transient: try again (connection reset, 503, disk briefly full).
        case retryable = 1
        /// Trying again will not help.
        case permanent = 2
        /// The inputs are wrong; never retried.
        case invalidInput = 3
        /// The step gave up waiting; retried like retryable.
        case timeout = 4
        /// The step stopped because it was cancelled.
        case cancelled = 5
    }

    public var kind: Kind
    /// Short machine-readable code ("ENOENT", "exit_2", "sha256_mismatch").
    public var code: String?
    public var message: String
    /// A server's hint for when to try again; replaces the computed backoff.
    public var retryAfter: Duration?

    public init(kind: Kind, code: String? = nil, message: String, retryAfter: Duration? = nil) {
        self.kind = kind
        self.code = code
        self.message = message
        self.retryAfter = retryAfter
    }

    public static func invalidInput(_ message: String, code: String? = nil) -> StepError {
        StepError(kind: .invalidInput, code: code, message: message)
    }

    public static func permanent(_ message: String, code: String? = nil) -> StepError {
        StepError(kind: .permanent, code: code, message: message)
    }

    public static func retryable(_ message: String, code: String? = nil, retryAfter: Duration? = nil) -> StepError {
        StepError(kind: .retryable, code: code, message: message, retryAfter: retryAfter)
    }

    public static func cancelled(_ message: String = "cancelled") -> StepError {
        StepError(kind: .cancelled, code: "cancelled", message: message)
    }

    /// An error from a failed system call: `what` plus strerror, the errno name as the code, and
    /// retryable for conditions that can pass (no space, I/O error, interrupted, busy, too many
    /// open files), permanent otherwise.
    public static func posix(_ what: String, errno number: Int32 = errno) -> StepError {
        let transient: Set<Int32> = [EAGAIN, EINTR, EIO, ENOSPC, EBUSY, EMFILE, ENFILE, ENOMEM, ETIMEDOUT, EDQUOT]
        return StepError(kind: transient.contains(number) ? .retryable : .permanent, code: errnoName(number),
                         message: "\(what): \(String(cString: strerror(number)))")
    }

    public var description: String { "\(kind)" + (code.map { " [\($0)]" } ?? "") + ": \(message)" }

    private static func errnoName(_ number: Int32) -> String {
        let names: [Int32: String] = [
            EPERM: "EPERM", ENOENT: "ENOENT", EINTR: "EINTR", EIO: "EIO", EBADF: "EBADF", EAGAIN: "EAGAIN",
            ENOMEM: "ENOMEM", EACCES: "EACCES", EBUSY: "EBUSY", EEXIST: "EEXIST", EXDEV: "EXDEV",
            ENOTDIR: "ENOTDIR", EISDIR: "EISDIR", EINVAL: "EINVAL", ENFILE: "ENFILE", EMFILE: "EMFILE",
            EFBIG: "EFBIG", ENOSPC: "ENOSPC", EROFS: "EROFS", ENAMETOOLONG: "ENAMETOOLONG", ENOTEMPTY: "ENOTEMPTY",
            ELOOP: "ELOOP", ETIMEDOUT: "ETIMEDOUT", EDQUOT: "EDQUOT", ENOEXEC: "ENOEXEC", ETXTBSY: "ETXTBSY",
        ]
        return names[number] ?? "errno_\(number)"
    }
}
