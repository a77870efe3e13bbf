import CLibSSH2
import OrchestratePluginKit

/// SFTP status codes (draft-ietf-secsh-filexfer-02 §7) as step errors: what the server refused
/// is permanent; only a failure of the channel itself is worth another attempt.
enum SFTPStatus {
    static func error(_ what: String, status: UInt) -> StepError {
        switch status {
        case LIBSSH2_FX_NO_SUCH_FILE, LIBSSH2_FX_NO_SUCH_PATH:
            return .permanent("\(what): no such file", code: "ENOENT")
        case LIBSSH2_FX_PERMISSION_DENIED, LIBSSH2_FX_WRITE_PROTECT:
            return .permanent("\(what): permission denied", code: "EACCES")
        case LIBSSH2_FX_FILE_ALREADY_EXISTS:
            return .permanent("\(what): already exists", code: "EEXIST")
        case LIBSSH2_FX_NO_SPACE_ON_FILESYSTEM, LIBSSH2_FX_QUOTA_EXCEEDED:
            return .retryable("\(what): no space left on the server", code: "ENOSPC")
        case LIBSSH2_FX_CONNECTION_LOST, LIBSSH2_FX_NO_CONNECTION:
            return .retryable("\(what): connection lost", code: "connection_lost")
        default:
            return .permanent("\(what): the server refused (SFTP status \(status))", code: "sftp_\(status)")
        }
    }
}
