import CCurl
import OrchestrateCurl
import OrchestratePluginKit

/// libcurl's FTP failures as step errors the scheduler acts on: refusals that another attempt
/// cannot change (an untrusted certificate, a server without TLS, a refused login, a missing
/// file) are permanent; broken connections and timeouts retryable.
enum FTPErrors {
    /// `answered`: the server had replied on the control connection (a failure after that is
    /// not an unreachable host: the engine would hold the step and probe a port that answers).
    static func transport(_ code: CURLcode, detail: String, server: ServerOptions, what: String, answered: Bool) -> StepError {
        var text = detail.isEmpty ? Curl.describe(code) : detail
        // The password never appears in a message, whatever a server echoed back.
        if let password = server.password, password.count >= 3 { text = text.replacingAll(password, with: "***") }
        let place = "\(what) on \(server.described)"
        switch code {
        case CURLE_USE_SSL_FAILED:
            return .permanent("""
                \(server.described) does not offer TLS (AUTH TLS refused: \(text)): refused, the password and the data \
                would travel in clear. Use tls: implicit if it speaks FTPS on a port of its own, or tls: none to accept \
                plain FTP
                """, code: "tls_unavailable")
        case CURLE_LOGIN_DENIED:
            return .permanent("\(server.described) refused the login of \(server.user): \(text)", code: "login_denied")
        case CURLE_REMOTE_FILE_NOT_FOUND:
            return .permanent("\(place): \(text) (no such file)", code: "ENOENT")
        case CURLE_REMOTE_ACCESS_DENIED:
            return .permanent("\(place): \(text)", code: "access_denied")
        case CURLE_QUOTE_ERROR:
            return .permanent("\(place): the server refused the command (\(text))", code: "command_refused")
        case CURLE_COULDNT_CONNECT where answered:
            return .retryable("\(place): the data connection failed: \(text)", code: "data_connection_failed")
        default:
            return CurlFailure.stepError(code, detail: text, place: place) { text in
                """
                TLS certificate verification failed for \(server.described): \(text). The server's certificate is not \
                trusted (self-signed or unknown CA) or does not name \(server.host); give its CA in ca_file
                """
            }
        }
    }
}

extension String {
    /// Every occurrence of `target` replaced (no Foundation in plugins).
    func replacingAll(_ target: String, with replacement: String) -> String {
        guard !target.isEmpty else { return self }
        var out = ""
        var rest = Substring(self)
        while let range = rest.firstRange(of: target) {
            out += rest[..<range.lowerBound] + replacement
            rest = rest[range.upperBound...]
        }
        return out + rest
    }
}
