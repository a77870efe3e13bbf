import CCurl
import OrchestratePluginKit

/// A libcurl multi handle that runs a step's exchanges, one or several at a time, on the step's
/// thread: no locks, and the step's cancel descriptor wakes the wait at once. Its connection
/// cache keeps connections alive from one request to the next.
final class CurlPool {
    private let multi: UnsafeMutableRawPointer
    private let step: StepContext

    init(step: StepContext) throws(StepError) {
        Curl.ensureInitialised()
        guard let multi = curl_multi_init() else { throw .retryable("libcurl could not create a multi handle", code: "curl_init") }
        self.multi = multi
        self.step = step
    }

    deinit { curl_multi_cleanup(multi) }

    /// Runs one exchange to its end; any HTTP status is a response.
    func run(_ exchange: Exchange) throws(StepError) -> Exchange.Response {
        var result: Exchange.Response?
        var pending: Exchange? = exchange
        try runAll(maxInFlight: 1, next: { () throws(StepError) -> Exchange? in
            defer { pending = nil }
            return pending
        }, done: { (_, response) throws(StepError) in result = response })
        return result!
    }

    /// Runs the exchanges `next` hands out (nil: no more), at most `maxInFlight` at once, and
    /// gives each response to `done` as it completes. The first failure (transport error, or
    /// one `next` or `done` throws) stops handing out more; the exchanges in flight are waited
    /// for, their responses given to `done` too (a part the server took is confirmed, not sent
    /// again by a retry that would race it), and then the failure is thrown. A cancel abandons
    /// them at once. `next` and `done` run on this thread.
    func runAll(maxInFlight: Int, next: () throws(StepError) -> Exchange?,
                done: (Exchange, Exchange.Response) throws(StepError) -> Void) throws(StepError)
    {
        var inFlight: [UnsafeMutableRawPointer: Exchange] = [:]
        defer { for easy in inFlight.keys { curl_multi_remove_handle(multi, easy) } }
        var exhausted = false
        var failure: StepError?
        func failed(_ error: StepError) {
            guard failure == nil else { return }
            failure = error
            if !inFlight.isEmpty {
                step.log(.info, "\(error.message); waiting for the \(inFlight.count) request(s) in flight to end before this attempt does")
            }
        }
        while true {
            while failure == nil, !exhausted, inFlight.count < maxInFlight {
                let exchange: Exchange?
                do { exchange = try next() } catch {
                    failed(error)
                    break
                }
                guard let exchange else { exhausted = true; break }
                inFlight[exchange.easy] = exchange
                curl_multi_add_handle(multi, exchange.easy)
            }
            if inFlight.isEmpty {
                if let failure { throw failure }
                return
            }
            var running: Int32 = 0
            curl_multi_perform(multi, &running)
            var left: Int32 = 0
            var finished: [(Exchange, CURLcode)] = []
            while let message = curl_multi_info_read(multi, &left) {
                guard message.pointee.msg == CURLMSG_DONE, let easy = message.pointee.easy_handle, let exchange = inFlight[easy] else { continue }
                finished.append((exchange, message.pointee.data.result))
            }
            for (exchange, code) in finished {
                curl_multi_remove_handle(multi, exchange.easy)
                inFlight[exchange.easy] = nil
                do { try done(exchange, try exchange.outcome(code).get()) } catch { failed(error) }
            }
            if !finished.isEmpty { continue }
            if !inFlight.values.contains(where: \.cancellable) {
                curl_multi_poll(multi, nil, 0, 200, nil)
                continue
            }
            let cancelFD = step.cancelFD
            var wait = curl_waitfd(fd: cancelFD, events: Int16(CURL_WAIT_POLLIN), revents: 0)
            var ready: Int32 = 0
            if cancelFD >= 0 {
                curl_multi_poll(multi, &wait, 1, 1000, &ready)
            } else {
                curl_multi_poll(multi, nil, 0, 200, &ready)
            }
            if wait.revents != 0 || step.isCancelled { throw .cancelled("\(step.stepType) was cancelled") }
        }
    }
}
