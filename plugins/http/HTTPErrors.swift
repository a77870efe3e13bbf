#if canImport(Glibc)
import Glibc
#endif
import CCurl
import OrchestrateCurl
import OrchestratePluginKit
import OrchestrateJSON

/// How HTTP outcomes become error kinds the scheduler acts on: transport failures and 408, 429
/// and 5xx are retryable (with the server's `Retry-After` as the delay), other 4xx permanent.
enum HTTPErrors {
    /// A libcurl failure (no HTTP status) as a step error.
    static func transport(_ code: CURLcode, url: String, detail: String = "") -> StepError {
        switch code {
        case CURLE_UNSUPPORTED_PROTOCOL, CURLE_URL_MALFORMAT:
            return .invalidInput("bad URL \(url): \(detail.isEmpty ? Curl.describe(code) : detail)", code: "curl_\(code.rawValue)")
        case CURLE_REMOTE_FILE_NOT_FOUND:
            return .permanent("\(url): \(detail.isEmpty ? Curl.describe(code) : detail)", code: "curl_\(code.rawValue)")
        default:
            return CurlFailure.stepError(code, detail: detail, place: url) { text in
                """
                TLS certificate verification failed for \(url): \(text). The server's certificate is not \
                trusted (self-signed or unknown CA); trust it with ca_file, or set insecure: true to skip \
                verification (not recommended)
                """
            }
        }
    }

    /// An unexpected HTTP status as a step error, with the server's own message when it gave one.
    static func status(_ response: Transfer.Response, method: String, url: String) -> StepError {
        let status = response.status
        let message = "\(method) \(url) answered \(status)" + serverMessage(response).map { ": \($0)" }.orEmpty
        let code = "http_\(status)"
        if status == 408 || status == 429 || status >= 500 {
            return .retryable(message, code: code, retryAfter: retryAfter(response.header("retry-after")))
        }
        return .permanent(message, code: code)
    }

    /// `Retry-After` as seconds or an HTTP date (RFC 9110 §10.2.3), as a delay from now.
    static func retryAfter(_ value: String?) -> Duration? {
        guard let value = value?.trimmingWhitespace, !value.isEmpty else { return nil }
        if let seconds = Int64(value) { return .seconds(max(0, seconds)) }
        let when = curl_getdate(value, nil)  // parses the three HTTP date formats
        guard when > 0 else { return nil }
        return .seconds(max(0, Int64(when) - Int64(time(nil))))
    }

    /// The error text of a JSON error body (Vimeo: `error`, `developer_message`), else the start
    /// of a text body.
    static func serverMessage(_ response: Transfer.Response) -> String? {
        guard !response.body.isEmpty else { return nil }
        if let json = try? JSONValue(parsing: response.body) {
            let keys = ["error", "message", "developer_message", "detail", "title"]
            let parts = keys.compactMap { json[$0]?.stringValue }
            if !parts.isEmpty { return parts.prefix(2).joined(separator: " — ") }
        }
        let text = response.bodyText.trimmingWhitespace
        // An HTML error page: its title says it all ("404 Not Found").
        let parts = text.split(separator: "<title>", maxSplits: 1)
        if parts.count == 2, let title = parts[1].split(separator: "</title>", maxSplits: 1).first {
            return String(title).trimmingWhitespace
        }
        return text.isEmpty ? nil : String(text.prefix(300))
    }
}

extension Optional where Wrapped == String {
    var orEmpty: String { self ?? "" }
}
