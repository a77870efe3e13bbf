import CCurl
import OrchestratePluginKit

/// libcurl's failures as step errors the scheduler acts on, the part every protocol shares: an
/// untrusted certificate is permanent, a bad URL invalid input, a timeout a timeout, a name that
/// does not resolve or a host that does not answer `unreachable` (the engine holds the step and
/// probes the host), anything else (resets, partial transfers, TLS handshake drops) retryable.
/// A plugin maps its own protocol's codes first (FTP's refused login) and hands the rest here.
public enum CurlFailure {
    /// `place` says what failed where, for the message ("RETR a/b on host:21", a URL); `detail`
    /// is the easy handle's `errorDetail`; `certificate` words an untrusted certificate's
    /// failure from libcurl's text, with what to do about it.
    public static func stepError(_ code: CURLcode, detail: String, place: String, certificate: (String) -> String) -> StepError {
        let text = detail.isEmpty ? Curl.describe(code) : detail
        switch code {
        case CURLE_PEER_FAILED_VERIFICATION, CURLE_SSL_CACERT_BADFILE, CURLE_SSL_ISSUER_ERROR:
            return .permanent(certificate(text), code: "tls_verification_failed")
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT:
            return .invalidInput("\(place): \(text)", code: "curl_\(code.rawValue)")
        case CURLE_OPERATION_TIMEDOUT:
            return StepError(kind: .timeout, code: "timeout", message: "\(place): \(text) (too slow or no answer)")
        case CURLE_COULDNT_RESOLVE_HOST, CURLE_COULDNT_RESOLVE_PROXY:
            // Held like an unreachable host (a name can come back: DNS trouble, a host being
            // renamed), saying what is wrong: a typo in a name is not a server that is down.
            return .retryable("\(place): \(text) (the name does not resolve)", code: "unreachable")
        case CURLE_COULDNT_CONNECT:
            return .retryable("\(place): \(text) (the host does not answer)", code: "unreachable")
        default:
            return .retryable("\(place): \(text)", code: "curl_\(code.rawValue)")
        }
    }
}
