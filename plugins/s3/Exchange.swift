#if canImport(Glibc)
import Glibc
#endif
import CCurl
import OrchestratePluginFiles
import OrchestratePluginKit

/// One signed S3 request on a libcurl easy handle, run by a `CurlPool` (alone, or beside others
/// in parallel). The body streams from the file with pread at libcurl's pace; a 2xx response body
/// goes to `sink` when there is one (a download range), any other body to a capped buffer (an
/// XML answer or error document). Memory stays flat for any size.
final class Exchange {
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
        /// Names lower-cased, of the final response.
        var headers: [(name: String, value: String)]
        var body: [UInt8]

        func header(_ name: String) -> String? {
            let lower = name.lowercased()
            return headers.last { $0.name == lower }?.value
        }

        var bodyText: String { String(decoding: body, as: UTF8.self) }
        var isSuccess: Bool { (200 ..< 300).contains(status) }
    }

    /// What the request is, for messages ("PUT bucket/key part 3"): never a URL with a signature.
    let label: String
    /// The caller's number for it (a part number, a range index).
    let tag: Int
    let easy: Curl.Handle
    private let step: StepContext
    private var headerList: UnsafeMutablePointer<curl_slist>?
    private let body: Body
    private var readPosition: Int64 = 0
    private var headers: [(name: String, value: String)] = []
    private var headerBytes = 0
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    private var memory: [UInt8] = []
    private static let memoryCap = 4 << 20
    private var sinkDecision: Bool?
    /// The in-memory answer was cut at `memoryCap`.
    private var truncated = false
    /// An error raised inside a callback (a disk full while writing a range), reported after.
    var callbackError: StepError?
    /// Receives the body of a response `acceptBody` accepts; return false to abort.
    var sink: ((UnsafeRawBufferPointer) -> Bool)?
    /// Asked at the first body byte with the status and headers: true sends the body to `sink`,
    /// false keeps it in memory (an answer or error document). Absent: 2xx bodies go to `sink`.
    var acceptBody: ((Response) -> Bool)?
    /// Bytes sent or received so far (request body, or response body to the sink).
    private(set) var bytesMoved: Int64 = 0
    /// False for the clean-up after a cancel (AbortMultipartUpload): it runs to its end, within
    /// a minute, whatever the step's cancel says.
    let cancellable: Bool
    private let rateCap: StepRateCap?

    init(step: StepContext, label: String, tag: Int = 0, method: String, url: String, headers: [(name: String, value: String)],
         body: Body, options: ConnectionOptions, cancellable: Bool = true) throws(StepError)
    {
        Curl.ensureInitialised()
        guard let easy = curl_easy_init() else { throw .retryable("libcurl could not create a handle", code: "curl_init") }
        self.easy = easy
        self.step = step
        self.label = label
        self.tag = tag
        self.body = body
        self.cancellable = cancellable
        rateCap = cancellable ? options.rateCap : nil
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        configure(method: method, url: url, headers: headers, options: options)
        if !cancellable { Curl.set(easy, CURLOPT_TIMEOUT, 60) }
    }

    deinit {
        curl_easy_cleanup(easy)
        curl_slist_free_all(headerList)
        errorBuffer.deallocate()
    }

    private func configure(method: String, url: String, headers: [(name: String, value: String)], options: ConnectionOptions) {
        let me = Unmanaged.passUnretained(self).toOpaque()
        Curl.set(easy, CURLOPT_URL, url)
        // A key may hold "." and ".." segments ("a/../b" is one object's name): the path goes
        // as signed, not squashed.
        Curl.set(easy, CURLOPT_PATH_AS_IS, true)
        Curl.set(easy, CURLOPT_NOSIGNAL, true)
        // Only http and https, and no redirect is followed (an S3 redirect names another region's
        // endpoint: it is reported, not obeyed with the signature of this one).
        Curl.set(easy, CURLOPT_PROTOCOLS_STR, "http,https")
        Curl.set(easy, CURLOPT_REDIR_PROTOCOLS_STR, "http,https")
        Curl.set(easy, CURLOPT_FOLLOWLOCATION, false)
        _ = orc_curl_reset_on_close(easy)
        Curl.set(easy, CURLOPT_ERRORBUFFER, pointer: UnsafeRawPointer(errorBuffer))
        Curl.set(easy, CURLOPT_USERAGENT, "orchestrate-s3/1.0")
        Curl.set(easy, CURLOPT_CONNECTTIMEOUT, options.connectTimeout)
        Curl.set(easy, CURLOPT_SSL_VERIFYPEER, true)
        Curl.set(easy, CURLOPT_SSL_VERIFYHOST, 2)
        if let ca = options.caFile { Curl.set(easy, CURLOPT_CAINFO, ca) }
        // A peer that stops sending for io_timeout seconds is dead.
        Curl.set(easy, CURLOPT_LOW_SPEED_LIMIT, 1)
        Curl.set(easy, CURLOPT_LOW_SPEED_TIME, options.ioTimeout)
        Curl.set(easy, CURLOPT_BUFFERSIZE, 512 * 1024)
        Curl.set(easy, CURLOPT_UPLOAD_BUFFERSIZE, 2 * 1024 * 1024)

        switch method {
        case "GET": break
        case "HEAD": Curl.set(easy, CURLOPT_NOBODY, true)
        case "PUT":
            Curl.set(easy, CURLOPT_UPLOAD, true)
            Curl.set(easy, CURLOPT_INFILESIZE_LARGE, Int(body.length))
        case "POST":
            Curl.set(easy, CURLOPT_POST, true)
            Curl.set(easy, CURLOPT_POSTFIELDSIZE_LARGE, Int(body.length))
        default:
            Curl.set(easy, CURLOPT_CUSTOMREQUEST, method)
        }

        // No "Expect: 100-continue" round trip; the Host header is the one that was signed.
        var lines = headers.map { $0.value.isEmpty ? "\($0.name);" : "\($0.name): \($0.value)" }
        lines.append("Expect:")
        if method == "POST" || method == "PUT" {
            if !headers.contains(where: { $0.name.lowercased() == "content-type" }) { lines.append("Content-Type: application/octet-stream") }
        }
        for line in lines { headerList = curl_slist_append(headerList, line) }
        Curl.set(easy, CURLOPT_HTTPHEADER, pointer: UnsafeRawPointer(headerList))

        typealias IOCallback = @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int
        let write: IOCallback = { data, size, count, me in
            Unmanaged<Exchange>.fromOpaque(me!).takeUnretainedValue().received(UnsafeRawBufferPointer(start: data, count: size * count))
        }
        let header: IOCallback = { data, size, count, me in
            Unmanaged<Exchange>.fromOpaque(me!).takeUnretainedValue().headerLine(UnsafeRawBufferPointer(start: data, count: size * count))
        }
        let read: IOCallback = { data, size, count, me in
            Unmanaged<Exchange>.fromOpaque(me!).takeUnretainedValue().fill(UnsafeMutableRawBufferPointer(start: data, count: size * count))
        }
        let seek: @convention(c) (UnsafeMutableRawPointer?, curl_off_t, Int32) -> Int32 = { me, offset, origin in
            guard origin == SEEK_SET else { return 2 }  // CURL_SEEKFUNC_CANTSEEK
            Unmanaged<Exchange>.fromOpaque(me!).takeUnretainedValue().readPosition = Int64(offset)
            return 0
        }
        let progress: @convention(c) (UnsafeMutableRawPointer?, curl_off_t, curl_off_t, curl_off_t, curl_off_t) -> Int32 = { me, _, _, _, _ in
            let exchange = Unmanaged<Exchange>.fromOpaque(me!).takeUnretainedValue()
            return exchange.cancellable && exchange.step.isCancelled ? 1 : 0
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

    // MARK: - Callbacks (on the pool's thread, inside curl_multi_perform)

    private func received(_ bytes: UnsafeRawBufferPointer) -> Int {
        if step.consumeBandwidth(bytes.count) && cancellable { return 0 }
        if let rateCap, rateCap.consume(bytes.count, step: step) { return 0 }
        if sinkDecision == nil {
            let status = Curl.infoInt(easy, CURLINFO_RESPONSE_CODE)
            let head = Response(status: status, headers: headers, body: [])
            sinkDecision = sink != nil && (acceptBody?(head) ?? head.isSuccess)
        }
        if sinkDecision == true, let sink {
            guard sink(bytes) else { return 0 }
            bytesMoved += Int64(bytes.count)
            return bytes.count
        }
        // An answer past the cap (a whole object where a range was asked) is cut there, not read
        // on: the caller decides from the status what it means.
        let room = max(0, Self.memoryCap - memory.count)
        memory.append(contentsOf: bytes.prefix(room))
        if bytes.count > room {
            truncated = true
            return 0
        }
        return bytes.count
    }

    private func headerLine(_ bytes: UnsafeRawBufferPointer) -> Int {
        let line = String(decoding: bytes, as: UTF8.self).trimmingWhitespace
        if line.hasPrefix("HTTP/") {
            headers = []  // a new response (after a 100 Continue)
            headerBytes = 0
        }
        headerBytes += bytes.count
        if headerBytes > 256 * 1024 {
            callbackError = .permanent("\(label): the response headers exceed 256 KiB (an endless or hostile header)", code: "headers_too_large")
            return 0
        }
        if let colon = line.firstIndex(of: ":") {
            headers.append((String(line[..<colon]).lowercased(), String(line[line.index(after: colon)...]).trimmingWhitespace))
        }
        return bytes.count
    }

    private func fill(_ buffer: UnsafeMutableRawBufferPointer) -> Int {
        let remaining = body.length - readPosition
        let wanted = Int(min(Int64(buffer.count), max(0, remaining)))
        guard wanted > 0, let base = buffer.baseAddress else { return 0 }
        if step.consumeBandwidth(wanted) && cancellable { return Int(CURL_READFUNC_ABORT) }
        if let rateCap, rateCap.consume(wanted, step: step) { return Int(CURL_READFUNC_ABORT) }
        switch body {
        case .none: return 0
        case .bytes(let bytes):
            bytes.withUnsafeBytes { base.copyMemory(from: $0.baseAddress! + Int(readPosition), byteCount: wanted) }
            readPosition += Int64(wanted)
            bytesMoved = readPosition
            return wanted
        case .file(let file, let offset, _):
            let n: Int
            do { n = try file.read(into: UnsafeMutableRawBufferPointer(start: base, count: wanted), at: offset + readPosition) } catch {
                callbackError = error
                return Int(CURL_READFUNC_ABORT)
            }
            if n == 0 {
                callbackError = .permanent("\(file.path) shrank while it was uploaded", code: "file_changed")
                return Int(CURL_READFUNC_ABORT)
            }
            readPosition += Int64(n)
            bytesMoved = readPosition
            return n
        }
    }

    /// The outcome once libcurl is done with it: the response (any status), or the failure.
    func outcome(_ code: CURLcode) -> Result<Response, StepError> {
        if let callbackError { return .failure(callbackError) }
        if code == CURLE_ABORTED_BY_CALLBACK, cancellable, step.isCancelled { return .failure(.cancelled("\(label) was cancelled")) }
        guard code == CURLE_OK || (code == CURLE_WRITE_ERROR && truncated) else { return .failure(S3Errors.transport(code, label: label, detail: String(cString: errorBuffer))) }
        return .success(Response(status: Curl.infoInt(easy, CURLINFO_RESPONSE_CODE), headers: headers, body: memory))
    }
}

extension StringProtocol {
    /// Without leading and trailing spaces, tabs, CR and LF (scalar-wise: "\r\n" is one
    /// Character in Swift).
    var trimmingWhitespace: String {
        let scalars = Array(unicodeScalars)
        func blank(_ s: Unicode.Scalar) -> Bool { s == " " || s == "\t" || s == "\r" || s == "\n" }
        guard let first = scalars.firstIndex(where: { !blank($0) }), let last = scalars.lastIndex(where: { !blank($0) }) else { return "" }
        var out = String.UnicodeScalarView()
        out.append(contentsOf: scalars[first...last])
        return String(out)
    }
}
