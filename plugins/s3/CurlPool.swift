import CCurl
import OrchestrateCurl
import OrchestratePluginKit

/// The step's exchanges on one `CurlMulti`, one or several at a time, on the step's thread: its
/// connection cache keeps connections alive from one request to the next.
final class CurlPool {
    private let multi: CurlMulti
    private let step: StepContext

    init(step: StepContext) throws(StepError) {
        multi = try CurlMulti()
        self.step = step
    }

    /// Runs one exchange to its end; any HTTP status is a response.
    func run(_ exchange: Exchange) throws(StepError) -> Exchange.Response {
        try exchange.outcome(try multi.perform(exchange.curl, step: step, cancellable: exchange.cancellable)).get()
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
        try multi.runAll(maxInFlight: maxInFlight, step: step, afterFailure: .finishInFlight, next: next) { (exchange, code) throws(StepError) in
            try done(exchange, try exchange.outcome(code).get())
        }
    }
}
