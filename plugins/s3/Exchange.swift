import CCurl
import OrchestrateCurl
import OrchestratePluginKit

/// One signed S3 request on a libcurl easy handle, run by a `CurlPool` (alone, or beside others
/// in parallel). The body streams from the file with pread at libcurl's pace; a 2xx response body
/// goes to `sink` when there is one (a download range), any other body to a capped buffer (an
/// XML answer or error document). Memory stays flat for any size.
final class Exchange: CurlRequest, CurlCallbacks {
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
    let curl: CurlEasy
    private let step: StepContext
    private var body: CurlBodyReader
    private var head = CurlResponseHead()
    /// An answer or error document; past the cap (a whole object where a range was asked) it
    /// is cut there, not read on: the caller decides from the status what it means.
    private var memory = CappedBuffer(cap: 4 << 20)
    private var sinkDecision: Bool?
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
    private let pacer: CurlPacer

    init(step: StepContext, label: String, tag: Int = 0, method: String, url: String, headers: [(name: String, value: String)],
         body: CurlBody, options: ConnectionOptions, cancellable: Bool = true) throws(StepError)
    {
        curl = try CurlEasy()
        self.step = step
        self.label = label
        self.tag = tag
        self.body = CurlBodyReader(body)
        self.cancellable = cancellable
        // The clean-up's bytes count against the run's and host's caps, not the step's own.
        pacer = CurlPacer(step: step, rateCap: cancellable ? options.rateCap : nil, cancellable: cancellable)
        curl.install(self)
        try configure(method: method, url: url, headers: headers, options: options, length: body.length)
        if !cancellable { curl.set(CURLOPT_TIMEOUT, 60) }
    }

    private func configure(method: String, url: String, headers: [(name: String, value: String)], options: ConnectionOptions,
                           length: Int64) throws(StepError)
    {
        curl.set(CURLOPT_URL, url)
        // A key may hold "." and ".." segments ("a/../b" is one object's name): the path goes
        // as signed, not squashed.
        curl.set(CURLOPT_PATH_AS_IS, true)
        // Only http and https, and no redirect is followed (an S3 redirect names another region's
        // endpoint: it is reported, not obeyed with the signature of this one).
        try curl.restrictProtocols("http,https")
        curl.set(CURLOPT_FOLLOWLOCATION, false)
        curl.dropUnsentBytesOnClose()
        curl.set(CURLOPT_USERAGENT, "orchestrate-s3/1.0")
        curl.set(CURLOPT_CONNECTTIMEOUT, options.connectTimeout)
        curl.verifyPeer(caFile: options.caFile)
        // A peer that stops sending for io_timeout seconds is dead.
        curl.stallTimeout(options.ioTimeout)
        curl.largeBuffers()

        switch method {
        case "GET": break
        case "HEAD": curl.set(CURLOPT_NOBODY, true)
        case "PUT":
            curl.set(CURLOPT_UPLOAD, true)
            curl.set(CURLOPT_INFILESIZE_LARGE, Int(length))
        case "POST":
            curl.set(CURLOPT_POST, true)
            curl.set(CURLOPT_POSTFIELDSIZE_LARGE, Int(length))
        default:
            curl.set(CURLOPT_CUSTOMREQUEST, method)
        }

        // No "Expect: 100-continue" round trip; the Host header is the one that was signed.
        var lines = headers.map { $0.value.isEmpty ? "\($0.name);" : "\($0.name): \($0.value)" }
        lines.append("Expect:")
        if method == "POST" || method == "PUT" {
            if !headers.contains(where: { $0.name.lowercased() == "content-type" }) { lines.append("Content-Type: application/octet-stream") }
        }
        curl.set(CURLOPT_HTTPHEADER, lines: lines)
    }

    // MARK: - Callbacks (on the pool's thread, inside curl_multi_perform)

    func curlReceived(_ bytes: UnsafeRawBufferPointer) -> Int {
        if pacer.wait(bytes.count) { return 0 }
        if sinkDecision == nil {
            let response = Response(status: curl.responseCode, headers: head.fields, body: [])
            sinkDecision = sink != nil && (acceptBody?(response) ?? response.isSuccess)
        }
        if sinkDecision == true, let sink {
            guard sink(bytes) else { return 0 }
            bytesMoved += Int64(bytes.count)
            return bytes.count
        }
        return memory.append(bytes) ? bytes.count : 0
    }

    func curlHeader(_ line: UnsafeRawBufferPointer) -> Int {
        guard head.take(line) else {
            callbackError = .permanent("\(label): the response headers exceed 256 KiB (an endless or hostile header)", code: "headers_too_large")
            return 0
        }
        return line.count
    }

    func curlFill(_ buffer: UnsafeMutableRawBufferPointer) -> Int {
        let n = body.fill(buffer, pacer: pacer, error: &callbackError)
        bytesMoved = body.position
        return n
    }

    func curlSeek(to offset: Int64) -> Bool { body.seek(to: offset) }

    func curlProgress(_ progress: CurlProgress) -> Bool { cancellable && step.isCancelled }

    /// The outcome once libcurl is done with it: the response (any status), or the failure.
    func outcome(_ code: CURLcode) -> Result<Response, StepError> {
        if let callbackError { return .failure(callbackError) }
        if code == CURLE_ABORTED_BY_CALLBACK, cancellable, step.isCancelled { return .failure(.cancelled("\(label) was cancelled")) }
        guard code == CURLE_OK || (code == CURLE_WRITE_ERROR && memory.truncated) else {
            return .failure(S3Errors.transport(code, label: label, detail: curl.errorDetail))
        }
        return .success(Response(status: curl.responseCode, headers: head.fields, body: memory.bytes))
    }
}
