#if canImport(Glibc)
import Glibc
#endif
import CCurl
import OrchestrateCurl
import OrchestratePluginFiles
import OrchestratePluginKit

/// One HTTP exchange on a libcurl easy handle, driven by a multi handle so that the step's
/// cancel file descriptor wakes the wait at once (cancel is noticed within milliseconds even on
/// a stalled connection).
///
/// Bodies stream: the request body is read from a file with pread at libcurl's pace, the
/// response body goes to `sink` (a file) or to a capped in-memory buffer. Memory stays flat for
/// any size.
///
/// Only http and https, and redirects are followed here rather than by libcurl, so that the
/// step's headers stay with the origin they were written for (see `Redirects`).
final class Transfer: CurlCallbacks {
    typealias Body = CurlBody

    struct Response {
        var status: Int
        /// Names lower-cased, in arrival order, of the final response only.
        var headers: [(name: String, value: String)]
        var body: [UInt8]
        var bodyTruncated: Bool

        func header(_ name: String) -> String? {
            let lower = name.lowercased()
            return headers.last { $0.name == lower }?.value
        }

        var bodyText: String { String(decoding: body, as: UTF8.self) }
    }

    private let step: StepContext
    private let curl: CurlEasy
    private var body: CurlBodyReader
    private var method: String
    /// The request headers; the step's own and credentials go once a redirect leaves the origin.
    private var requestHeaders: [String: String]
    /// The step's `headers` input, lower-cased: what a cross-origin redirect drops.
    private let stepHeaderNames: Set<String>
    private let followRedirects: Bool
    /// The URL of the request under way (the step's, then each redirect's).
    private var currentURL: String
    /// Set at the first body byte of a redirect that will be followed: the body is not read.
    private var skippedRedirectBody = false
    private var head = CurlResponseHead()
    private var memory: CappedBuffer
    private var ticker = ProgressTicker()
    private let pacer: CurlPacer
    /// An error raised inside a callback (disk full, sink refusal), reported after the transfer.
    var callbackError: StepError?
    /// Receives response body bytes instead of the memory buffer; return false to abort.
    var sink: ((UnsafeRawBufferPointer) -> Bool)?
    /// Asked once, at the first body byte, with the status and headers: true sends the body to
    /// `sink`, false keeps it in memory (an error page). Absent: every body goes to `sink`.
    var acceptBody: ((Int, Transfer.Response) -> Bool)?
    private var bodyDecision: Bool?
    /// Called at most every 100 ms with (downloaded, download total, uploaded, upload total).
    var onProgress: ((Int64, Int64, Int64, Int64) -> Void)?

    init(step: StepContext, method: String, url: String, headers: [String: String], body: Body = .none,
         options: TransferOptions, memoryCap: Int = 1 << 20, decodeContent: Bool = false, freshConnection: Bool = false) throws(StepError)
    {
        try Self.checkHeaders(headers)
        self.step = step
        self.curl = try CurlEasy()
        self.body = CurlBodyReader(body)
        self.method = method.uppercased()
        self.requestHeaders = headers
        self.stepHeaderNames = Set(options.headers.keys.map { $0.lowercased() })
        self.followRedirects = options.followRedirects
        self.currentURL = url
        self.memory = CappedBuffer(cap: memoryCap)
        // The run's and the host's --max-rate, and the step's max_rate, in the callbacks.
        self.pacer = CurlPacer(step: step, rateCap: options.rateCap)
        try Redirects.checkStepURL(url)
        // libcurl itself refuses every other protocol too, whatever the URL (defence in depth).
        try curl.restrictProtocols(Redirects.schemes.joined(separator: ","))
        curl.install(self)
        configure(url: url, options: options)
        // Transfers of files keep the bytes as sent; API calls may take them compressed.
        if decodeContent { curl.set(CURLOPT_ACCEPT_ENCODING, "") }
        // On a reused connection that dies before any answer, libcurl re-sends the whole
        // request on a new one by itself: for a large body sent from an offset the server may
        // have passed, a fresh connection makes a cut an error, so the caller asks the server
        // how far it got instead of re-sending everything.
        if freshConnection { curl.set(CURLOPT_FRESH_CONNECT, true) }
    }

    private func configure(url: String, options: TransferOptions) {
        curl.set(CURLOPT_URL, url)
        curl.dropUnsentBytesOnClose()
        curl.set(CURLOPT_USERAGENT, "orchestrate-http/1.0")
        curl.set(CURLOPT_FOLLOWLOCATION, false)  // followed in perform(), see Redirects
        curl.set(CURLOPT_CONNECTTIMEOUT, options.connectTimeout)
        // Proxies: libcurl reads http_proxy / https_proxy / no_proxy itself, as curl(1) does.
        curl.verifyPeer(!options.insecure, caFile: options.caFile)
        if options.minSpeed > 0 {
            curl.set(CURLOPT_LOW_SPEED_LIMIT, options.minSpeed)
            curl.set(CURLOPT_LOW_SPEED_TIME, options.minSpeedTime)
        }
        curl.largeBuffers()
        configureMethod()
        configureHeaders()
    }

    /// The method and its body options, for the first request and after a redirect changed them.
    private func configureMethod() {
        switch method {
        case "GET": curl.set(CURLOPT_HTTPGET, true)
        case "HEAD": curl.set(CURLOPT_NOBODY, true)
        case "POST":
            curl.set(CURLOPT_POST, true)
            curl.set(CURLOPT_POSTFIELDSIZE_LARGE, Int(body.body.length))
        default:
            if case .none = body.body, method != "PUT", method != "PATCH" {
                curl.set(CURLOPT_CUSTOMREQUEST, method)
            } else {
                curl.set(CURLOPT_UPLOAD, true)
                curl.set(CURLOPT_INFILESIZE_LARGE, Int(body.body.length))
                if method != "PUT" { curl.set(CURLOPT_CUSTOMREQUEST, method) }
            }
        }
    }

    /// Every header one line with a token for its name: a CR or LF would end the header and start
    /// another that the server reads as sent (a value from another step's output, a secret, a
    /// content type). The message names the header, never its value (it may be a secret).
    static func checkHeaders(_ headers: [String: String]) throws(StepError) {
        for (name, value) in headers {
            if name.isEmpty || name.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7F || $0 == UInt8(ascii: ":") }) {
                throw .invalidInput("the header name \(name.debugDescription) is not a token (a space, colon or control character)",
                                    code: "bad_header")
            }
            if value.utf8.contains(where: { $0 == 0x0D || $0 == 0x0A || $0 == 0 }) {
                throw .invalidInput("the value of the header \(name) holds a line break or a NUL: it would end the header and start another",
                                    code: "bad_header")
            }
        }
    }

    private func configureHeaders() {
        // No "Expect: 100-continue" round trip: servers that do not answer it cost a second each.
        var all = requestHeaders
        if all.keys.first(where: { $0.lowercased() == "expect" }) == nil { all["Expect"] = "" }
        curl.set(CURLOPT_HTTPHEADER, lines: all.sorted(by: { $0.key < $1.key }).map { $0.value.isEmpty ? "\($0.key):" : "\($0.key): \($0.value)" })
    }

    // MARK: - Callbacks (on the step's thread, inside curl_multi_perform)

    func curlReceived(_ bytes: UnsafeRawBufferPointer) -> Int {
        if bodyDecision == nil, redirectToFollow(status: curl.responseCode) {
            // The body of a redirect is not read (an endless one costs nothing); perform()
            // treats this stop as the end and follows the Location.
            skippedRedirectBody = true
            return 0
        }
        // Cancelled while waiting for the bandwidth caps: abort (0 bytes taken).
        if pacer.wait(bytes.count) { return 0 }
        if bodyDecision == nil {
            let status = curl.responseCode
            bodyDecision = sink != nil && (acceptBody?(status, Response(status: status, headers: head.fields, body: [], bodyTruncated: false)) ?? true)
        }
        if bodyDecision == true, let sink {
            return sink(bytes) ? bytes.count : 0
        }
        // Past the cap the rest is not even read; perform() treats this stop as the end.
        return memory.append(bytes) ? bytes.count : 0
    }

    func curlHeader(_ line: UnsafeRawBufferPointer) -> Int {
        guard head.take(line) else {
            callbackError = .permanent("the response headers exceed \(CurlResponseHead.cap / 1024) KiB (an endless or hostile header); nothing was kept",
                                       code: "headers_too_large")
            return 0
        }
        return line.count
    }

    func curlFill(_ buffer: UnsafeMutableRawBufferPointer) -> Int { body.fill(buffer, pacer: pacer, error: &callbackError) }

    func curlSeek(to offset: Int64) -> Bool { body.seek(to: offset) }

    func curlProgress(_ progress: CurlProgress) -> Bool {
        if step.isCancelled { return true }
        if ticker.due() { onProgress?(progress.downloaded, progress.downloadTotal, progress.uploaded, progress.uploadTotal) }
        return false
    }

    // MARK: - Running

    /// Whether a response of `status` with the headers read so far is a redirect to follow.
    private func redirectToFollow(status: Int) -> Bool {
        followRedirects && Redirects.statuses.contains(status) && head.value("location") != nil
    }

    /// Runs the exchange to its end, following redirects (when `follow_redirects`) up to
    /// `Redirects.limit`. Throws a cancelled error when the step is cancelled, the callback's
    /// error, the transport failure mapped to an error kind, or a refused redirect; any other
    /// HTTP status is a response (the caller decides what a status means).
    func perform(in session: CurlMulti? = nil) throws(StepError) -> Response {
        let origin = Origin(currentURL)
        var leftOrigin = false
        var redirects = 0
        while true {
            let response = try performOnce(in: session)
            guard redirectToFollow(status: response.status) else { return response }
            // Resolved here: libcurl sets CURLINFO_REDIRECT_URL only when the body was read.
            let location = response.header("location") ?? ""
            guard let target = Redirects.resolve(location, against: currentURL), let from = Origin(currentURL) else {
                throw .permanent("\(currentURL) answered \(response.status) with Location \(location), which cannot be followed",
                                 code: "redirect_refused")
            }
            if let reason = Redirects.refusal(from: from, to: target) {
                throw .permanent("\(currentURL) redirected (\(response.status)) to \(target): \(reason)", code: "redirect_refused")
            }
            redirects += 1
            guard redirects <= Redirects.limit else {
                throw .permanent("\(currentURL): more than \(Redirects.limit) redirects", code: "too_many_redirects")
            }
            if !leftOrigin && Origin(target) != origin {
                leftOrigin = true
                let dropped = requestHeaders.keys.filter {
                    stepHeaderNames.contains($0.lowercased()) || Redirects.credentialHeaders.contains($0.lowercased())
                }
                for name in dropped { requestHeaders[name] = nil }
                if !dropped.isEmpty {
                    step.log(.info, "redirected to another origin (\(target)): not sending \(dropped.sorted().joined(separator: ", ")) there")
                }
            }
            let next = Redirects.nextMethod(after: response.status, of: method)
            if next.method != method {  // to a GET (never from a HEAD): no custom method left
                curl.set(CURLOPT_CUSTOMREQUEST, pointer: nil)
                method = next.method
            }
            if !next.keepsBody { body.drop() }
            configureMethod()
            configureHeaders()
            currentURL = target
            curl.set(CURLOPT_URL, target)
            resetForNextRequest()
        }
    }

    /// Clears what one request's callbacks gathered, before the redirect's request.
    private func resetForNextRequest() {
        _ = body.seek(to: 0)
        head.reset()
        memory.reset()
        bodyDecision = nil
        skippedRedirectBody = false
        curl.clearError()
    }

    /// One request and its response, without following a redirect.
    private func performOnce(in session: CurlMulti?) throws(StepError) -> Response {
        let multi: CurlMulti
        if let session { multi = session } else { multi = try CurlMulti() }
        var code = try multi.perform(curl, step: step)
        if let callbackError { throw callbackError }
        if code == CURLE_ABORTED_BY_CALLBACK, step.isCancelled { throw .cancelled("the transfer was cancelled") }
        if code == CURLE_WRITE_ERROR && (memory.truncated || skippedRedirectBody) { code = CURLE_OK }  // stopped on purpose
        let url = curl.infoString(CURLINFO_EFFECTIVE_URL) ?? ""
        if head.inHeaders && (code == CURLE_OUT_OF_MEMORY || (code == CURLE_RECV_ERROR && head.bytes > 100 << 10)) {
            // libcurl refuses a header line over 100 KiB ("out of memory") and headers over
            // 300 KiB: a server whose header never ends.
            throw .permanent("\(url): the response headers never ended within libcurl's limits (\(Curl.describe(code))): an endless or hostile header",
                             code: "headers_too_large")
        }
        if code != CURLE_OK {
            throw HTTPErrors.transport(code, url: url, detail: curl.errorDetail)
        }
        return Response(status: curl.responseCode, headers: head.fields, body: memory.bytes, bodyTruncated: memory.truncated)
    }
}
