import OrchestratePluginKit

/// SFTP status codes (draft-ietf-secsh-filexfer-02 §7) as step errors: what the server refused
/// is permanent; only a failure of the channel itself is worth another attempt.
enum SFTPStatus {
    static func error(_ what: String, status: UInt32, message: String = "") -> StepError {
        let detail = message.isEmpty ? "" : " (\(message))"
        switch status {
        case SFTP.Status.noSuchFile, SFTP.Status.noSuchPath:
            return .permanent("\(what): no such file", code: "ENOENT")
        case SFTP.Status.permissionDenied, SFTP.Status.writeProtect:
            return .permanent("\(what): permission denied", code: "EACCES")
        case SFTP.Status.fileAlreadyExists:
            return .permanent("\(what): already exists", code: "EEXIST")
        case SFTP.Status.noSpace, SFTP.Status.quotaExceeded:
            return .retryable("\(what): no space left on the server", code: "ENOSPC")
        case SFTP.Status.connectionLost:
            return .retryable("\(what): connection lost", code: "connection_lost")
        case SFTP.Status.unsupported:
            return .permanent("\(what): the server does not support this operation\(detail)", code: "sftp_unsupported")
        default:
            return .permanent("\(what): the server refused (SFTP status \(status))\(detail)", code: "sftp_\(status)")
        }
    }
}
