import CCurl
import OrchestratePluginKit

/// What an http step may talk to, and how it follows redirects.
///
/// Only `http` and `https`, for the step's URL and for every URL a server hands back (an upload
/// link, a tus Location, a redirect): libcurl also speaks file, ftp, gopher, dict, scp… and a
/// `file://` upload link would overwrite a local file. libcurl is told so as well
/// (CURLOPT_PROTOCOLS_STR), but the check here comes first, with a clear error.
///
/// Redirects are followed by `Transfer` itself, not by libcurl, because libcurl forwards every
/// custom header (an `X-Api-Key` from a secret) to whatever host a redirect names. Once a
/// redirect leaves the origin (scheme, host, port) of the step's URL, the step's `headers`,
/// `Authorization` and `Cookie` are not sent again, as browsers and curl do for
/// `Authorization`. A redirect from https to http is refused (the request would go out in clear).
enum Redirects {
    /// The most redirects one request follows (curl's default is 50; libcurl's was set to 10).
    static let limit = 10

    /// The statuses followed, with their method rules (RFC 9110 §15.4, as curl applies them).
    static let statuses: Set<Int> = [301, 302, 303, 307, 308]

    /// The schemes an http step speaks.
    static let schemes = ["http", "https"]

    /// Headers that carry credentials whatever the step calls them.
    static let credentialHeaders: Set<String> = ["authorization", "cookie"]

    /// The method of the request that follows a `status` redirect of a `method` request, and
    /// whether it keeps the body: 303 turns everything but HEAD into a GET, 301/302 turn a POST
    /// into a GET (what curl and browsers do); 307/308 keep both.
    static func nextMethod(after status: Int, of method: String) -> (method: String, keepsBody: Bool) {
        if status == 303 && method != "HEAD" { return ("GET", false) }
        if (status == 301 || status == 302) && method == "POST" { return ("GET", false) }
        return (method, true)
    }

    /// The step's own URL: an `invalid_input` error unless it is http or https.
    static func checkStepURL(_ url: String) throws(StepError) {
        guard let origin = Origin(url) else {
            throw .invalidInput("bad URL \(url): not a URL libcurl can parse", code: "bad_url")
        }
        guard schemes.contains(origin.scheme) else {
            throw .invalidInput("\(url): http steps speak only http and https, not \(origin.scheme)", code: "unsupported_scheme")
        }
    }

    /// `location` (a Location header) made absolute against `base`, as libcurl resolves it;
    /// nil when it cannot be.
    static func resolve(_ location: String, against base: String) -> String? {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        // The flags libcurl's own redirect code uses (a space in a Location is encoded).
        let flags = UInt32(CURLU_NON_SUPPORT_SCHEME) | UInt32(CURLU_URLENCODE) | UInt32(CURLU_ALLOW_SPACE)
        guard curl_url_set(handle, CURLUPART_URL, base, UInt32(CURLU_NON_SUPPORT_SCHEME) | UInt32(CURLU_GUESS_SCHEME)) == CURLUE_OK,
              curl_url_set(handle, CURLUPART_URL, location, flags) == CURLUE_OK
        else { return nil }
        var value: UnsafeMutablePointer<CChar>?
        guard curl_url_get(handle, CURLUPART_URL, &value, 0) == CURLUE_OK, let value else { return nil }
        defer { curl_free(value) }
        return String(cString: value)
    }

    /// Why following `from` → `to` is refused, or nil when it may be followed.
    static func refusal(from: Origin, to target: String) -> String? {
        guard let next = Origin(target) else { return "not a URL libcurl can parse" }
        guard schemes.contains(next.scheme) else { return "only http and https redirects are followed, not \(next.scheme)" }
        if from.scheme == "https" && next.scheme == "http" {
            return "a redirect from https to http (a downgrade) would send the request in clear; refused"
        }
        return nil
    }
}

/// scheme://host:port of a URL, as libcurl parses it (lower-cased; the port made explicit).
struct Origin: Equatable {
    let scheme: String
    let host: String
    let port: String

    init?(_ url: String) {
        guard let handle = curl_url() else { return nil }
        defer { curl_url_cleanup(handle) }
        // Any scheme parses (the caller decides); a URL without one is guessed as curl(1) does.
        let flags = UInt32(CURLU_NON_SUPPORT_SCHEME) | UInt32(CURLU_GUESS_SCHEME)
        guard curl_url_set(handle, CURLUPART_URL, url, flags) == CURLUE_OK else { return nil }
        func part(_ what: CURLUPart, _ flags: UInt32 = 0) -> String? {
            var value: UnsafeMutablePointer<CChar>?
            guard curl_url_get(handle, what, &value, flags) == CURLUE_OK, let value else { return nil }
            defer { curl_free(value) }
            return String(cString: value).lowercased()
        }
        guard let scheme = part(CURLUPART_SCHEME) else { return nil }
        self.scheme = scheme
        host = part(CURLUPART_HOST) ?? ""
        port = part(CURLUPART_PORT, UInt32(CURLU_DEFAULT_PORT)) ?? ""
    }
}
