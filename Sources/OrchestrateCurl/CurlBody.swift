import CCurl
import OrchestratePluginFiles
import OrchestratePluginKit

/// A request body.
public enum CurlBody {
    case none
    case bytes([UInt8])
    /// `length` bytes of `file`, from `offset`.
    case file(LocalFile, offset: Int64, length: Int64)

    public var length: Int64 {
        switch self {
        case .none: 0
        case .bytes(let b): Int64(b.count)
        case .file(_, _, let length): length
        }
    }
}

/// A request body as libcurl's read callback takes it: from memory, or from the file with pread
/// at libcurl's pace (memory stays flat for any size), each chunk after the bandwidth caps let
/// it go.
public struct CurlBodyReader {
    public private(set) var body: CurlBody
    /// Bytes of the body handed to libcurl so far.
    public private(set) var position: Int64 = 0

    public init(_ body: CurlBody) { self.body = body }

    /// Back to `offset` (libcurl sends the body again, after a redirect or on a new connection).
    public mutating func seek(to offset: Int64) -> Bool {
        guard offset >= 0 && offset <= body.length else { return false }
        position = offset
        return true
    }

    /// The body is gone (a redirect turned the request into a GET).
    public mutating func drop() {
        body = .none
        position = 0
    }

    /// Fills `buffer` with the next bytes: their count, 0 at the end, or CURL_READFUNC_ABORT
    /// with `error` set (the file could not be read, or it shrank) or left nil (cancelled while
    /// waiting for the bandwidth caps).
    public mutating func fill(_ buffer: UnsafeMutableRawBufferPointer, pacer: CurlPacer, error: inout StepError?) -> Int {
        let wanted = Int(min(Int64(buffer.count), max(0, body.length - position)))
        guard wanted > 0, let base = buffer.baseAddress else { return 0 }
        if pacer.wait(wanted) { return Int(CURL_READFUNC_ABORT) }
        switch body {
        case .none:
            return 0
        case .bytes(let bytes):
            bytes.withUnsafeBytes { base.copyMemory(from: $0.baseAddress! + Int(position), byteCount: wanted) }
            position += Int64(wanted)
            return wanted
        case .file(let file, let offset, _):
            let n: Int
            do { n = try file.read(into: UnsafeMutableRawBufferPointer(start: base, count: wanted), at: offset + position) } catch let failure {
                error = failure
                return Int(CURL_READFUNC_ABORT)
            }
            if n == 0 {
                error = .permanent("\(file.path) shrank while it was sent", code: "file_changed")
                return Int(CURL_READFUNC_ABORT)
            }
            position += Int64(n)
            return n
        }
    }
}

/// The bandwidth caps a transfer's bytes wait for: the run's and the host's --max-rate
/// (`StepContext.consumeBandwidth`), then the step's own `max_rate`. Waiting slows the socket
/// (TCP backpressure does the rest).
public struct CurlPacer {
    public let step: StepContext
    public let rateCap: StepRateCap?
    /// False for a clean-up that must run to its end: the caps still count its bytes, a cancel
    /// does not stop it.
    public let cancellable: Bool

    public init(step: StepContext, rateCap: StepRateCap?, cancellable: Bool = true) {
        self.step = step
        self.rateCap = rateCap
        self.cancellable = cancellable
    }

    /// Waits until `bytes` may move; true when cancelled while waiting (abort the transfer).
    public func wait(_ bytes: Int) -> Bool {
        if step.consumeBandwidth(bytes) && cancellable { return true }
        return cancellable && rateCap?.consume(bytes, step: step) == true
    }
}
