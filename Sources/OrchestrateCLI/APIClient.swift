import CCurl
import Foundation
import OrchestrateJSON

/// GET requests to a remote `serve --http` for `status|list|events --server URL`, with libcurl
/// (already the http plugin's): TLS certificates are verified against the system's trusted CAs
/// or `--cacert FILE`. The bearer token is read from `--token-file` and only ever sent in the
/// Authorization header: it never appears on a command line or in an error message.
final class APIClient {
    let server: String
    private let token: String
    private let tokenFile: String
    private let caFile: String?

    init(server: String, tokenFile: String, caFile: String?) throws {
        guard let url = URL(string: server), url.scheme == "http" || url.scheme == "https", url.host != nil else {
            throw CLIFailure.usage("--server takes the URL serve --http printed, e.g. https://host:8080, not '\(server)'")
        }
        let text: String
        do { text = try String(contentsOfFile: tokenFile, encoding: .utf8) } catch {
            throw CLIFailure.usage("cannot read --token-file \(tokenFile): \((error as NSError).localizedDescription)")
        }
        let token = text.trimmingCharacters(in: .whitespacesAndNewlines)
        guard !token.isEmpty, !token.contains(where: \.isNewline) else {
            throw CLIFailure.usage("--token-file \(tokenFile) must hold one bearer token (as the state directory's http-token file does)")
        }
        if let caFile, !FileManager.default.isReadableFile(atPath: caFile) {
            throw CLIFailure.usage("cannot read --cacert \(caFile)")
        }
        self.server = server.hasSuffix("/") ? String(server.dropLast()) : server
        self.token = token
        self.tokenFile = tokenFile
        self.caFile = caFile
    }

    /// GETs `path` (with its query) and returns the JSON answer; nil for a 404 when
    /// `missingIsNil`. Any other failure throws a CLIFailure that says what to change.
    func get(_ path: String, missingIsNil: Bool = false) throws -> JSONValue? {
        let (status, body) = try request(path)
        let text = String(decoding: body, as: UTF8.self)
        if status == 404 && missingIsNil { return nil }
        guard status == 200 else {
            // A problem document's detail says what went wrong; the token is not in it.
            let detail = (try? JSONValue(parsing: text))?["detail"]?.stringValue ?? "HTTP \(status)"
            switch status {
            case 401: throw CLIFailure.usage("\(server) refused the token in --token-file \(tokenFile): \(detail)")
            case 403: throw CLIFailure.usage("\(server) refused the request (403): \(detail)")
            default: throw CLIFailure(status: ExitStatus.runFailed, message: "\(server)\(path): \(status) \(detail)")
            }
        }
        do { return try JSONValue(parsing: text) } catch {
            throw CLIFailure(status: ExitStatus.runFailed, message: "\(server)\(path) did not answer JSON (is it an orchestrate serve --http?)")
        }
    }

    /// The largest answer taken (a page of 1000 runs or journal events is a few MiB): a server
    /// that sends more, or an endless body, is cut off with an error instead of filling memory.
    static let maxAnswerBytes = 64 << 20

    /// Collects a response body (libcurl's write callback hands over one chunk at a time), up to
    /// `maxAnswerBytes`.
    private final class Body {
        var bytes: [UInt8] = []
        var tooLarge = false
    }

    private func request(_ path: String) throws -> (status: Int, body: [UInt8]) {
        guard let handle = curl_easy_init() else { throw CLIFailure(status: ExitStatus.runFailed, message: "libcurl failed to start") }
        defer { curl_easy_cleanup(handle) }
        var headers: UnsafeMutablePointer<curl_slist>? = curl_slist_append(nil, "Authorization: Bearer \(token)")
        headers = curl_slist_append(headers, "Accept: application/json")
        defer { curl_slist_free_all(headers) }
        let body = Body()
        let bodyPointer = Unmanaged.passUnretained(body).toOpaque()
        var errorBuffer = [CChar](repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        let code: CURLcode = withExtendedLifetime(body) {
            errorBuffer.withUnsafeMutableBufferPointer { errors in
                // libcurl copies string options.
                (server + path).withCString { _ = orc_curl_setopt_pointer(handle, CURLOPT_URL, $0) }
                orc_curl_setopt_pointer(handle, CURLOPT_HTTPHEADER, headers)
                orc_curl_setopt_pointer(handle, CURLOPT_ERRORBUFFER, errors.baseAddress)
                orc_curl_setopt_long(handle, CURLOPT_NOSIGNAL, 1)
                orc_curl_setopt_long(handle, CURLOPT_CONNECTTIMEOUT, 10)
                orc_curl_setopt_long(handle, CURLOPT_TIMEOUT, 60)
                caFile?.withCString { _ = orc_curl_setopt_pointer(handle, CURLOPT_CAINFO, $0) }
                orc_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, bodyPointer)
                orc_curl_setopt_write_callback(handle, CURLOPT_WRITEFUNCTION) { data, size, count, context in
                    let body = Unmanaged<Body>.fromOpaque(context!).takeUnretainedValue()
                    let length = size * count
                    guard body.bytes.count + length <= APIClient.maxAnswerBytes else {
                        body.tooLarge = true
                        return 0  // libcurl stops with CURLE_WRITE_ERROR
                    }
                    if let data { data.withMemoryRebound(to: UInt8.self, capacity: length) { body.bytes.append(contentsOf: UnsafeBufferPointer(start: $0, count: length)) } }
                    return length
                }
                return curl_easy_perform(handle)
            }
        }
        if body.tooLarge {
            throw CLIFailure(status: ExitStatus.runFailed, message: "\(server)\(path): the answer is larger than "
                             + "\(Self.maxAnswerBytes >> 20) MiB; refused (is it an orchestrate serve --http?)")
        }
        guard code == CURLE_OK else {
            let message = errorBuffer.prefix { $0 != 0 }.map { UInt8(bitPattern: $0) }
            let reason = message.isEmpty ? String(cString: curl_easy_strerror(code)) : String(decoding: message, as: UTF8.self)
            let hint = code == CURLE_PEER_FAILED_VERIFICATION || code == CURLE_SSL_CACERT_BADFILE
                ? " (the server's certificate is not trusted: give the CA that signed it with --cacert FILE)" : ""
            throw CLIFailure(status: ExitStatus.runFailed, message: "cannot reach \(server): \(reason)\(hint)")
        }
        var status = 0
        orc_curl_getinfo_long(handle, CURLINFO_RESPONSE_CODE, &status)
        return (status, body.bytes)
    }

    /// `text` as one query-string value.
    static func encode(_ text: String) -> String {
        var allowed = CharacterSet.alphanumerics
        allowed.insert(charactersIn: "-._~")
        return text.addingPercentEncoding(withAllowedCharacters: allowed) ?? text
    }
}
