import CCurl
import OrchestratePluginKit

/// A request a `CurlMulti` runs: its easy handle, and whether the step's cancel stops it (the
/// clean-up after a cancel runs to its end).
public protocol CurlRequest: AnyObject {
    var curl: CurlEasy { get }
    var cancellable: Bool { get }
}

public extension CurlRequest {
    var cancellable: Bool { true }
}

/// A libcurl multi handle that runs a step's requests, one or several at a time, on the step's
/// thread: no locks, and the step's cancel descriptor wakes the wait at once (a cancel is noticed
/// within milliseconds even on a stalled connection). Its connection cache keeps connections
/// alive from one request to the next.
public final class CurlMulti {
    private let multi: UnsafeMutableRawPointer

    public init() throws(StepError) {
        Curl.ensureInitialised()
        guard let multi = curl_multi_init() else { throw .retryable("libcurl could not create a multi handle", code: "curl_init") }
        self.multi = multi
    }

    deinit { curl_multi_cleanup(multi) }

    /// Runs one request to its end and returns libcurl's result; throws `.cancelled` when the
    /// step is cancelled, unless `cancellable` is false (a clean-up that must run to its end).
    public func perform(_ easy: CurlEasy, step: StepContext, cancellable: Bool = true) throws(StepError) -> CURLcode {
        var result = CURLE_OK
        var pending: Single? = Single(easy, cancellable: cancellable)
        try runAll(maxInFlight: 1, step: step, next: { () throws(StepError) -> Single? in
            defer { pending = nil }
            return pending
        }, done: { (_, code) throws(StepError) in result = code })
        return result
    }

    /// What `runAll` does with the requests in flight when one fails.
    public enum AfterFailure: Sendable {
        /// Abandons them at once (their connections are closed).
        case abandonInFlight
        /// Hands out no more, but waits for those in flight (each ends, or its stall timeout
        /// ends it) and gives their results to `done` too: a request the server took is known,
        /// not sent again by a retry that would race it. A cancel still abandons them at once.
        case finishInFlight
    }

    /// Runs the requests `next` hands out (nil: no more), at most `maxInFlight` at once, and
    /// gives each one's result to `done` as it completes. The first error (`next`'s, `done`'s,
    /// or the step's cancel) stops handing out more; the requests in flight are abandoned or
    /// finished (`afterFailure`), and then it is thrown (a cancel's at once). `next` and `done`
    /// run on this thread.
    public func runAll<Request: CurlRequest>(maxInFlight: Int, step: StepContext, afterFailure: AfterFailure = .abandonInFlight,
                                             next: () throws(StepError) -> Request?,
                                             done: (Request, CURLcode) throws(StepError) -> Void) throws(StepError)
    {
        var inFlight: [UnsafeMutableRawPointer: Request] = [:]
        defer { for easy in inFlight.keys { curl_multi_remove_handle(multi, easy) } }
        var exhausted = false
        var failure: StepError?
        func failed(_ error: StepError) throws(StepError) {
            guard failure == nil else { return }
            guard afterFailure == .finishInFlight, !inFlight.isEmpty else { throw error }
            failure = error
            step.log(.info, "\(error.message); waiting for the \(inFlight.count) request(s) in flight to end before this attempt does")
        }
        while true {
            while failure == nil, !exhausted, inFlight.count < maxInFlight {
                let request: Request?
                do { request = try next() } catch {
                    try failed(error)
                    break
                }
                guard let request else { exhausted = true; break }
                inFlight[request.curl.handle] = request
                curl_multi_add_handle(multi, request.curl.handle)
            }
            if inFlight.isEmpty {
                if let failure { throw failure }
                return
            }
            var running: Int32 = 0
            curl_multi_perform(multi, &running)
            var left: Int32 = 0
            var finished: [(Request, CURLcode)] = []
            while let message = curl_multi_info_read(multi, &left) {
                guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle, let request = inFlight[easy] else { continue }
                finished.append((request, message.pointee.data.result))
            }
            for (request, code) in finished {
                curl_multi_remove_handle(multi, request.curl.handle)
                inFlight[request.curl.handle] = nil
                do { try done(request, code) } catch { try failed(error) }
            }
            if !finished.isEmpty { continue }
            let cancelFD = step.cancelFD
            guard cancelFD >= 0, inFlight.values.contains(where: \.cancellable) else {
                curl_multi_poll(multi, nil, 0, 200, nil)
                if step.isCancelled, inFlight.values.contains(where: \.cancellable) { throw .cancelled("\(step.stepType) was cancelled") }
                continue
            }
            var wait = curl_waitfd(fd: cancelFD, events: Int16(CURL_WAIT_POLLIN), revents: 0)
            var ready: Int32 = 0
            curl_multi_poll(multi, &wait, 1, 1000, &ready)
            if wait.revents != 0 || step.isCancelled { throw .cancelled("\(step.stepType) was cancelled") }
        }
    }

    private final class Single: CurlRequest {
        let curl: CurlEasy
        let cancellable: Bool

        init(_ curl: CurlEasy, cancellable: Bool) {
            self.curl = curl
            self.cancellable = cancellable
        }
    }
}
