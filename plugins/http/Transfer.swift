#if canImport(Glibc)
import Glibc
#endif
import CCurl
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
final class Transfer {
    enum Body {
        case none
        case bytes([UInt8])
        /// `length` bytes of `file`, from `offset`.
        case file(LocalFile, offset: Int64, length: Int64)

        var length: Int64 {
            switch self {
            case .none: 0
            case .bytes(let b): Int64(b.count)
            case .file(_, _, let length): length
            }
        }
    }

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
    private let easy: Curl.Handle
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private var requestBody: Body
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
    private var readPosition: Int64 = 0
    private var headers: [(name: String, value: String)] = []
    /// Bytes of header lines of the current response: a server that never ends its header is
    /// cut off at `headerCap` (before libcurl's own 300 KiB limit, with a clearer message).
    private var headerBytes = 0
    /// Between a status line and the blank line that ends its headers.
    private var inHeaders = false
    static let headerCap = 256 * 1024
    /// libcurl's detailed message for the last failure (CURLOPT_ERRORBUFFER).
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    private var memory: [UInt8] = []
    private let memoryCap: Int
    private var truncated = false
    private var lastProgress: UInt64 = 0
    private var rateLimiter: StepRateCap?
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
        Curl.ensureInitialised()
        guard let easy = curl_easy_init() else { throw .retryable("libcurl could not create a handle", code: "curl_init") }
        self.step = step
        self.easy = easy
        self.requestBody = body
        self.method = method.uppercased()
        self.requestHeaders = headers
        self.stepHeaderNames = Set(options.headers.keys.map { $0.lowercased() })
        self.followRedirects = options.followRedirects
        self.currentURL = url
        self.memoryCap = memoryCap
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        try Redirects.checkStepURL(url)
        // libcurl itself refuses every other protocol too, whatever the URL (defence in depth).
        let protocols = Redirects.schemes.joined(separator: ",")
        guard Curl.setChecked(easy, CURLOPT_PROTOCOLS_STR, protocols), Curl.setChecked(easy, CURLOPT_REDIR_PROTOCOLS_STR, protocols) else {
            throw .permanent("libcurl refused to restrict its protocols to \(protocols)", code: "curl_init")
        }
        configure(url: url, options: options)
        // Transfers of files keep the bytes as sent; API calls may take them compressed.
        if decodeContent { Curl.set(easy, CURLOPT_ACCEPT_ENCODING, "") }
        // On a reused connection that dies before any answer, libcurl re-sends the whole
        // request on a new one by itself: for a large body sent from an offset the server may
        // have passed, a fresh connection makes a cut an error, so the caller asks the server
        // how far it got instead of re-sending everything.
        if freshConnection { Curl.set(easy, CURLOPT_FRESH_CONNECT, true) }
    }

    deinit {
        curl_easy_cleanup(easy)
        curl_slist_free_all(headerList)
        errorBuffer.deallocate()
    }

    private func configure(url: String, options: TransferOptions) {
        let me = Unmanaged.passUnretained(self).toOpaque()
        Curl.set(easy, CURLOPT_URL, url)
        Curl.set(easy, CURLOPT_NOSIGNAL, true)
        // An abandoned request's unsent bytes are dropped, never delivered late (see the shim).
        _ = orc_curl_reset_on_close(easy)
        Curl.set(easy, CURLOPT_ERRORBUFFER, pointer: UnsafeRawPointer(errorBuffer))
        Curl.set(easy, CURLOPT_USERAGENT, "orchestrate-http/1.0")
        Curl.set(easy, CURLOPT_FOLLOWLOCATION, false)  // followed in perform(), see Redirects
        Curl.set(easy, CURLOPT_CONNECTTIMEOUT, options.connectTimeout)
        // Proxies: libcurl reads http_proxy / https_proxy / no_proxy itself, as curl(1) does.
        if options.insecure {
            Curl.set(easy, CURLOPT_SSL_VERIFYPEER, false)
            Curl.set(easy, CURLOPT_SSL_VERIFYHOST, 0)
        } else {
            Curl.set(easy, CURLOPT_SSL_VERIFYPEER, true)
            Curl.set(easy, CURLOPT_SSL_VERIFYHOST, 2)
        }
        if let ca = options.caFile { Curl.set(easy, CURLOPT_CAINFO, ca) }
        if options.minSpeed > 0 {
            Curl.set(easy, CURLOPT_LOW_SPEED_LIMIT, options.minSpeed)
            Curl.set(easy, CURLOPT_LOW_SPEED_TIME, options.minSpeedTime)
        }
        rateLimiter = options.rateCap  // the step's max_rate, applied in the callbacks
        // Large buffers: fewer callbacks per GiB.
        Curl.set(easy, CURLOPT_BUFFERSIZE, 512 * 1024)
        Curl.set(easy, CURLOPT_UPLOAD_BUFFERSIZE, 2 * 1024 * 1024)

        configureMethod()
        configureHeaders()

        typealias IOCallback = @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int
        let write: IOCallback = { data, size, count, me in
            Unmanaged<Transfer>.fromOpaque(me!).takeUnretainedValue().received(UnsafeRawBufferPointer(start: data, count: size * count))
        }
        let header: IOCallback = { data, size, count, me in
            Unmanaged<Transfer>.fromOpaque(me!).takeUnretainedValue().headerLine(UnsafeRawBufferPointer(start: data, count: size * count))
        }
        let read: IOCallback = { data, size, count, me in
            Unmanaged<Transfer>.fromOpaque(me!).takeUnretainedValue().fill(UnsafeMutableRawBufferPointer(start: data, count: size * count))
        }
        let seek: @convention(c) (UnsafeMutableRawPointer?, curl_off_t, Int32) -> Int32 = { me, offset, origin in
            guard origin == SEEK_SET else { return 2 }  // CURL_SEEKFUNC_CANTSEEK
            Unmanaged<Transfer>.fromOpaque(me!).takeUnretainedValue().readPosition = Int64(offset)
            return 0
        }
        let progress: @convention(c) (UnsafeMutableRawPointer?, curl_off_t, curl_off_t, curl_off_t, curl_off_t) -> Int32 = {
            me, dltotal, dlnow, ultotal, ulnow in
            Unmanaged<Transfer>.fromOpaque(me!).takeUnretainedValue().progressed(Int64(dlnow), Int64(dltotal), Int64(ulnow), Int64(ultotal))
        }
        Curl.set(easy, CURLOPT_WRITEFUNCTION, write: write)
        Curl.set(easy, CURLOPT_WRITEDATA, pointer: me)
        Curl.set(easy, CURLOPT_HEADERFUNCTION, write: header)
        Curl.set(easy, CURLOPT_HEADERDATA, pointer: me)
        Curl.set(easy, CURLOPT_READFUNCTION, read: read)
        Curl.set(easy, CURLOPT_READDATA, pointer: me)
        Curl.set(easy, CURLOPT_SEEKFUNCTION, seek: seek)
        Curl.set(easy, CURLOPT_SEEKDATA, pointer: me)
        Curl.set(easy, CURLOPT_XFERINFOFUNCTION, xferinfo: progress)
        Curl.set(easy, CURLOPT_XFERINFODATA, pointer: me)
        Curl.set(easy, CURLOPT_NOPROGRESS, false)
    }

    /// The method and its body options, for the first request and after a redirect changed them.
    private func configureMethod() {
        switch method {
        case "GET": Curl.set(easy, CURLOPT_HTTPGET, true)
        case "HEAD": Curl.set(easy, CURLOPT_NOBODY, true)
        case "POST":
            Curl.set(easy, CURLOPT_POST, true)
            Curl.set(easy, CURLOPT_POSTFIELDSIZE_LARGE, Int(requestBody.length))
        default:
            if case .none = requestBody, method != "PUT", method != "PATCH" {
                Curl.set(easy, CURLOPT_CUSTOMREQUEST, method)
            } else {
                Curl.set(easy, CURLOPT_UPLOAD, true)
                Curl.set(easy, CURLOPT_INFILESIZE_LARGE, Int(requestBody.length))
                if method != "PUT" { Curl.set(easy, CURLOPT_CUSTOMREQUEST, method) }
            }
        }
    }

    private func configureHeaders() {
        // No "Expect: 100-continue" round trip: servers that do not answer it cost a second each.
        var all = requestHeaders
        if all.keys.first(where: { $0.lowercased() == "expect" }) == nil { all["Expect"] = "" }
        curl_slist_free_all(headerList)
        headerList = nil
        for (name, value) in all.sorted(by: { $0.key < $1.key }) {
            let line = value.isEmpty ? "\(name):" : "\(name): \(value)"
            headerList = curl_slist_append(headerList, line)
        }
        Curl.set(easy, CURLOPT_HTTPHEADER, pointer: UnsafeRawPointer(headerList))
    }

    // MARK: - Callbacks (on the step's thread, inside curl_multi_perform)

    private func received(_ bytes: UnsafeRawBufferPointer) -> Int {
        if bodyDecision == nil, redirectToFollow(status: Curl.infoInt(easy, CURLINFO_RESPONSE_CODE)) {
            // The body of a redirect is not read (an endless one costs nothing); perform()
            // treats this stop as the end and follows the Location.
            skippedRedirectBody = true
            return 0
        }
        // The run's and the host's --max-rate: waiting here slows the socket reads (TCP
        // backpressure does the rest). Cancelled while waiting: abort (0 bytes taken).
        if step.consumeBandwidth(bytes.count) { return 0 }
        if let rateLimiter, rateLimiter.consume(bytes.count, step: step) { return 0 }
        if bodyDecision == nil {
            let status = Curl.infoInt(easy, CURLINFO_RESPONSE_CODE)
            let head = Response(status: status, headers: headers, body: [], bodyTruncated: false)
            bodyDecision = sink != nil && (acceptBody?(status, head) ?? true)
        }
        if bodyDecision == true, let sink {
            return sink(bytes) ? bytes.count : 0
        }
        let room = max(0, memoryCap - memory.count)
        memory.append(contentsOf: bytes.prefix(room))
        if bytes.count > room {
            // Past the cap the rest is not even read: a huge (or endless) body costs neither
            // memory nor the time to drain it. perform() treats this stop as the end.
            truncated = true
            return 0
        }
        return bytes.count
    }

    private func headerLine(_ bytes: UnsafeRawBufferPointer) -> Int {
        let line = String(decoding: bytes, as: UTF8.self).trimmingWhitespace
        if line.hasPrefix("HTTP/") {
            headers = []  // a new response (after a redirect or a 100 Continue)
            headerBytes = 0
            inHeaders = true
        } else if line.isEmpty {
            inHeaders = false
        }
        headerBytes += bytes.count
        if headerBytes > Self.headerCap {
            callbackError = .permanent("the response headers exceed \(Self.headerCap / 1024) KiB (an endless or hostile header); nothing was kept",
                                       code: "headers_too_large")
            return 0
        } else if let colon = line.firstIndex(of: ":") {
            let name = String(line[..<colon]).lowercased()
            let value = String(line[line.index(after: colon)...]).trimmingWhitespace
            headers.append((name, value))
        }
        return bytes.count
    }

    private func fill(_ buffer: UnsafeMutableRawBufferPointer) -> Int {
        let remaining = requestBody.length - readPosition
        let wanted = Int(min(Int64(buffer.count), max(0, remaining)))
        guard wanted > 0, let base = buffer.baseAddress else { return 0 }
        // The run's and the host's --max-rate, before handing libcurl the next chunk.
        if step.consumeBandwidth(wanted) { return Int(CURL_READFUNC_ABORT) }
        if let rateLimiter, rateLimiter.consume(wanted, step: step) { return Int(CURL_READFUNC_ABORT) }
        switch requestBody {
        case .none: return 0
        case .bytes(let bytes):
            bytes.withUnsafeBytes { source in
                base.copyMemory(from: source.baseAddress! + Int(readPosition), byteCount: wanted)
            }
            readPosition += Int64(wanted)
            return wanted
        case .file(let file, let offset, _):
            let n: Int
            do { n = try file.read(into: UnsafeMutableRawBufferPointer(start: base, count: wanted), at: offset + readPosition) } catch {
                callbackError = error
                return Int(CURL_READFUNC_ABORT)
            }
            if n == 0 {
                callbackError = .permanent("the file being uploaded shrank while it was sent", code: "file_changed")
                return Int(CURL_READFUNC_ABORT)
            }
            readPosition += Int64(n)
            return n
        }
    }

    private func progressed(_ dlnow: Int64, _ dltotal: Int64, _ ulnow: Int64, _ ultotal: Int64) -> Int32 {
        if step.isCancelled { return 1 }
        let now = Clock.milliseconds()
        if now - lastProgress >= 100 {
            lastProgress = now
            onProgress?(dlnow, dltotal, ulnow, ultotal)
        }
        return 0
    }

    // MARK: - Running

    /// Whether a response of `status` with the headers read so far is a redirect to follow.
    private func redirectToFollow(status: Int) -> Bool {
        followRedirects && Redirects.statuses.contains(status) && headers.contains { $0.name == "location" }
    }

    /// Runs the exchange to its end, following redirects (when `follow_redirects`) up to
    /// `Redirects.limit`. Throws a cancelled error when the step is cancelled, the callback's
    /// error, the transport failure mapped to an error kind, or a refused redirect; any other
    /// HTTP status is a response (the caller decides what a status means).
    func perform(in session: CurlSession? = nil) throws(StepError) -> Response {
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
                Curl.set(easy, CURLOPT_CUSTOMREQUEST, pointer: nil)
                method = next.method
            }
            if !next.keepsBody { requestBody = .none }
            configureMethod()
            configureHeaders()
            currentURL = target
            Curl.set(easy, CURLOPT_URL, target)
            resetForNextRequest()
        }
    }

    /// Clears what one request's callbacks gathered, before the redirect's request.
    private func resetForNextRequest() {
        readPosition = 0
        headers = []
        headerBytes = 0
        inHeaders = false
        memory = []
        truncated = false
        bodyDecision = nil
        skippedRedirectBody = false
        errorBuffer[0] = 0
    }

    /// One request and its response, without following a redirect.
    private func performOnce(in session: CurlSession?) throws(StepError) -> Response {
        let owned = session == nil ? try CurlSession() : nil
        let multi = (session ?? owned!).multi
        curl_multi_add_handle(multi, easy)
        defer { curl_multi_remove_handle(multi, easy) }
        let cancelFD = step.cancelFD
        var running: Int32 = 1
        var cancelled = false
        while true {
            curl_multi_perform(multi, &running)
            if running == 0 { break }
            var wait = curl_waitfd(fd: cancelFD, events: Int16(CURL_WAIT_POLLIN), revents: 0)
            var ready: Int32 = 0
            if cancelFD >= 0 {
                curl_multi_poll(multi, &wait, 1, 1000, &ready)
            } else {
                curl_multi_poll(multi, nil, 0, 200, &ready)
            }
            if wait.revents != 0 || step.isCancelled { cancelled = true; break }
        }
        if cancelled { throw .cancelled("the transfer was cancelled") }
        var left: Int32 = 0
        var code = CURLE_OK
        while let message = curl_multi_info_read(multi, &left) {
            if message.pointee.msg == CURLMSG_DONE { code = message.pointee.data.result }
        }
        if let callbackError { throw callbackError }
        if code == CURLE_ABORTED_BY_CALLBACK, step.isCancelled { throw .cancelled("the transfer was cancelled") }
        if code == CURLE_WRITE_ERROR && (truncated || skippedRedirectBody) { code = CURLE_OK }  // stopped on purpose
        let url = Curl.infoString(easy, CURLINFO_EFFECTIVE_URL) ?? ""
        if inHeaders && (code == CURLE_OUT_OF_MEMORY || (code == CURLE_RECV_ERROR && headerBytes > 100 << 10)) {
            // libcurl refuses a header line over 100 KiB ("out of memory") and headers over
            // 300 KiB: a server whose header never ends.
            throw .permanent("\(url): the response headers never ended within libcurl's limits (\(Curl.describe(code))): an endless or hostile header",
                             code: "headers_too_large")
        }
        if code != CURLE_OK {
            throw HTTPErrors.transport(code, url: url, detail: String(cString: errorBuffer))
        }
        return Response(status: Curl.infoInt(easy, CURLINFO_RESPONSE_CODE), headers: headers, body: memory,
                        bodyTruncated: truncated)
    }
}

/// A libcurl multi handle kept across the requests of one step (the chunks of a tus upload, the
/// verify calls of a streaming upload): its connection cache lets each request reuse the
/// previous one's connection instead of opening a new one.
final class CurlSession {
    let multi: UnsafeMutableRawPointer

    init() throws(StepError) {
        Curl.ensureInitialised()
        guard let multi = curl_multi_init() else { throw .retryable("libcurl could not create a multi handle", code: "curl_init") }
        self.multi = multi
    }

    deinit { curl_multi_cleanup(multi) }
}

/// A monotonic clock, for throttling and progress.
enum Clock {
    static func nanoseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1_000_000_000 + UInt64(ts.tv_nsec)
    }

    static func milliseconds() -> UInt64 {
        var ts = timespec()
        clock_gettime(CLOCK_MONOTONIC, &ts)
        return UInt64(ts.tv_sec) * 1000 + UInt64(ts.tv_nsec) / 1_000_000
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces, tabs, CR and LF (scalar-wise: "\r\n" is one
    /// Character in Swift, so Character comparisons would miss it).
    var trimmingWhitespace: String {
        let scalars = Array(unicodeScalars)
        func blank(_ s: Unicode.Scalar) -> Bool { s == " " || s == "\t" || s == "\r" || s == "\n" }
        guard let first = scalars.firstIndex(where: { !blank($0) }), let last = scalars.lastIndex(where: { !blank($0) }) else { return "" }
        var out = String.UnicodeScalarView()
        out.append(contentsOf: scalars[first...last])
        return String(out)
    }
}
