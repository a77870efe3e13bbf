#if canImport(Glibc)
import Glibc
#endif
import CCurl
import OrchestratePluginKit

/// What one request's libcurl callbacks do; each has a default that ignores what it is given.
/// They run on the thread that drives the transfer (`CurlMulti`), inside libcurl.
public protocol CurlCallbacks: AnyObject {
    /// Response body bytes: returns how many were taken (fewer aborts the transfer).
    func curlReceived(_ bytes: UnsafeRawBufferPointer) -> Int
    /// One response header line as it came (with its CRLF): returns its length to go on.
    func curlHeader(_ line: UnsafeRawBufferPointer) -> Int
    /// Request body bytes into `buffer`: their count, 0 at the end, or CURL_READFUNC_ABORT.
    func curlFill(_ buffer: UnsafeMutableRawBufferPointer) -> Int
    /// libcurl goes back in the request body (to send it again): false when that cannot be done.
    func curlSeek(to offset: Int64) -> Bool
    /// Bytes so far, at least once a second while the transfer lives: true aborts it.
    func curlProgress(_ progress: CurlProgress) -> Bool
}

public extension CurlCallbacks {
    func curlReceived(_ bytes: UnsafeRawBufferPointer) -> Int { bytes.count }
    func curlHeader(_ line: UnsafeRawBufferPointer) -> Int { line.count }
    func curlFill(_ buffer: UnsafeMutableRawBufferPointer) -> Int { 0 }
    func curlSeek(to offset: Int64) -> Bool { false }
    func curlProgress(_ progress: CurlProgress) -> Bool { false }
}

/// libcurl's transfer counters, as its progress callback gives them.
public struct CurlProgress: Sendable {
    public var downloaded: Int64
    public var downloadTotal: Int64
    public var uploaded: Int64
    public var uploadTotal: Int64
}

/// A libcurl easy handle with what every request on it needs: the error buffer (libcurl's
/// detailed message), its string lists, and the five callbacks wired to a `CurlCallbacks`
/// (the object that owns this handle; held weakly). `reset()` forgets a request's options but
/// keeps the open connection and the TLS session cache, so successive requests reuse them.
public final class CurlEasy {
    public let handle: Curl.Handle
    private let errorBuffer = UnsafeMutablePointer<CChar>.allocate(capacity: Int(CURL_ERROR_SIZE) + 1)
    private var lists: [UInt32: UnsafeMutablePointer<curl_slist>] = [:]
    private weak var callbacks: (any CurlCallbacks)?

    public init() throws(StepError) {
        Curl.ensureInitialised()
        guard let handle = curl_easy_init() else { throw .retryable("libcurl could not create a handle", code: "curl_init") }
        self.handle = handle
        errorBuffer.initialize(repeating: 0, count: Int(CURL_ERROR_SIZE) + 1)
        configureBasics()
    }

    deinit {
        curl_easy_cleanup(handle)
        for list in lists.values { curl_slist_free_all(list) }
        errorBuffer.deallocate()
    }

    /// Sends the callbacks of every later request to `callbacks`.
    public func install(_ callbacks: any CurlCallbacks) {
        self.callbacks = callbacks
        installCallbacks()
    }

    /// Forgets every option of the last request (the connection and TLS session stay).
    public func reset() {
        curl_easy_reset(handle)
        for list in lists.values { curl_slist_free_all(list) }
        lists = [:]
        configureBasics()
        if callbacks != nil { installCallbacks() }
    }

    /// libcurl's detailed message about the last failure ("Recv failure: Connection reset by
    /// peer" rather than curl_easy_strerror's "Failure when receiving data from the peer").
    public var errorDetail: String { String(cString: errorBuffer) }

    public func clearError() { errorBuffer[0] = 0 }

    // MARK: - Options

    public func set(_ option: CURLoption, _ value: Int) { Curl.set(handle, option, value) }
    public func set(_ option: CURLoption, _ value: Bool) { Curl.set(handle, option, value) }
    public func set(_ option: CURLoption, _ value: String) { Curl.set(handle, option, value) }
    public func set(_ option: CURLoption, pointer: UnsafeRawPointer?) { Curl.set(handle, option, pointer: pointer) }

    /// A string list option (CURLOPT_HTTPHEADER, CURLOPT_POSTQUOTE): kept alive until the
    /// option is set again or the handle reset.
    public func set(_ option: CURLoption, lines: [String]) {
        var list: UnsafeMutablePointer<curl_slist>?
        for line in lines { list = curl_slist_append(list, line) }
        Curl.set(handle, option, pointer: UnsafeRawPointer(list))
        if let old = lists[option.rawValue] { curl_slist_free_all(old) }
        lists[option.rawValue] = list
    }

    /// Only these protocols (`"ftp,ftps"`), for requests and redirects alike, whatever a URL
    /// says (defence in depth); a libcurl that refuses the restriction is not used.
    public func restrictProtocols(_ protocols: String) throws(StepError) {
        guard Curl.setChecked(handle, CURLOPT_PROTOCOLS_STR, protocols), Curl.setChecked(handle, CURLOPT_REDIR_PROTOCOLS_STR, protocols) else {
            throw .permanent("libcurl refused to restrict its protocols to \(protocols)", code: "curl_init")
        }
    }

    /// The certificate and the host name checked (against `caFile`, else the system store), or,
    /// with `verify` false, neither.
    public func verifyPeer(_ verify: Bool = true, caFile: String?) {
        set(CURLOPT_SSL_VERIFYPEER, verify)
        set(CURLOPT_SSL_VERIFYHOST, verify ? 2 : 0)
        if let caFile { set(CURLOPT_CAINFO, caFile) }
    }

    /// A connection that moves no byte for `seconds` is dead (CURLOPT_LOW_SPEED_*).
    public func stallTimeout(_ seconds: Int) {
        set(CURLOPT_LOW_SPEED_LIMIT, 1)
        set(CURLOPT_LOW_SPEED_TIME, seconds)
    }

    /// Large buffers: fewer callbacks per GiB.
    public func largeBuffers() {
        set(CURLOPT_BUFFERSIZE, 512 * 1024)
        set(CURLOPT_UPLOAD_BUFFERSIZE, 2 * 1024 * 1024)
    }

    /// Every socket ends with a reset instead of an orderly close: an abandoned request's unsent
    /// bytes are dropped, never delivered late (see `orc_curl_reset_on_close` in the shim).
    public func dropUnsentBytesOnClose() { _ = orc_curl_reset_on_close(handle) }

    // MARK: - Information

    public func info(_ info: CURLINFO) -> Int { Curl.infoInt(handle, info) }
    public func infoOff(_ info: CURLINFO) -> Int64 { Curl.infoOff(handle, info) }
    public func infoString(_ info: CURLINFO) -> String? { Curl.infoString(handle, info) }
    /// The last response's status (HTTP) or reply code (FTP); 0 when none came.
    public var responseCode: Int { info(CURLINFO_RESPONSE_CODE) }

    // MARK: - Wiring

    private func configureBasics() {
        set(CURLOPT_NOSIGNAL, true)
        set(CURLOPT_ERRORBUFFER, pointer: UnsafeRawPointer(errorBuffer))
        errorBuffer[0] = 0
    }

    private func installCallbacks() {
        let me = Unmanaged.passUnretained(self).toOpaque()
        typealias IOCallback = @convention(c) (UnsafeMutablePointer<CChar>?, Int, Int, UnsafeMutableRawPointer?) -> Int
        let write: IOCallback = { data, size, count, me in
            CurlEasy.owner(me)?.curlReceived(UnsafeRawBufferPointer(start: data, count: size * count)) ?? 0
        }
        let header: IOCallback = { data, size, count, me in
            CurlEasy.owner(me)?.curlHeader(UnsafeRawBufferPointer(start: data, count: size * count)) ?? 0
        }
        let read: IOCallback = { data, size, count, me in
            CurlEasy.owner(me)?.curlFill(UnsafeMutableRawBufferPointer(start: data, count: size * count)) ?? Int(CURL_READFUNC_ABORT)
        }
        let seek: @convention(c) (UnsafeMutableRawPointer?, curl_off_t, Int32) -> Int32 = { me, offset, origin in
            guard origin == SEEK_SET, CurlEasy.owner(me)?.curlSeek(to: Int64(offset)) == true else { return 2 }  // CURL_SEEKFUNC_CANTSEEK
            return 0
        }
        let progress: @convention(c) (UnsafeMutableRawPointer?, curl_off_t, curl_off_t, curl_off_t, curl_off_t) -> Int32 = {
            me, dltotal, dlnow, ultotal, ulnow in
            let counters = CurlProgress(downloaded: Int64(dlnow), downloadTotal: Int64(dltotal), uploaded: Int64(ulnow), uploadTotal: Int64(ultotal))
            return CurlEasy.owner(me)?.curlProgress(counters) ?? true ? 1 : 0
        }
        _ = orc_curl_setopt_write_callback(handle, CURLOPT_WRITEFUNCTION, write)
        _ = orc_curl_setopt_pointer(handle, CURLOPT_WRITEDATA, me)
        _ = orc_curl_setopt_write_callback(handle, CURLOPT_HEADERFUNCTION, header)
        _ = orc_curl_setopt_pointer(handle, CURLOPT_HEADERDATA, me)
        _ = orc_curl_setopt_read_callback(handle, CURLOPT_READFUNCTION, read)
        _ = orc_curl_setopt_pointer(handle, CURLOPT_READDATA, me)
        _ = orc_curl_setopt_seek_callback(handle, CURLOPT_SEEKFUNCTION, seek)
        _ = orc_curl_setopt_pointer(handle, CURLOPT_SEEKDATA, me)
        _ = orc_curl_setopt_xferinfo_callback(handle, CURLOPT_XFERINFOFUNCTION, progress)
        _ = orc_curl_setopt_pointer(handle, CURLOPT_XFERINFODATA, me)
        set(CURLOPT_NOPROGRESS, false)
    }

    private static func owner(_ me: UnsafeMutableRawPointer?) -> (any CurlCallbacks)? {
        Unmanaged<CurlEasy>.fromOpaque(me!).takeUnretainedValue().callbacks
    }
}
