@testable import OrchestrateEngine
import OrchestrateJSON
import OrchestratePluginHost
import Testing

/// `AttemptsInFlight`: one current attempt per instance, and results taken only from it.
@Suite struct AttemptsInFlightTests {
    /// A plugin call that is never run here: the bookkeeping does not call it.
    final class NotRun: StepRunning {
        func run() -> Result<[String: JSONValue], StepFailure> { .success([:]) }
        func cancel(_ reason: CancelReason) {}
    }

    func attempt(_ inFlight: inout AttemptsInFlight) -> Attempt {
        Attempt(token: inFlight.newToken(), invocation: NotRun(), leaseHolder: nil, deadline: nil)
    }

    func result(_ instanceID: String, _ attempt: Attempt) -> Completion {
        Completion(instanceID: instanceID, token: attempt.token, result: .success([:]))
    }

    @Test func attemptsWaitForTheCommitBeforeTheyLaunchAndCountAtOnce() {
        var inFlight = AttemptsInFlight()
        #expect(inFlight.isEmpty)
        inFlight.add(attempt(&inFlight), of: ExecutorStateFixtures.instance("a[0]", kind: .item))
        inFlight.add(attempt(&inFlight), of: ExecutorStateFixtures.instance("a[1]", kind: .item))
        #expect(inFlight.count == 2 && !inFlight.isEmpty)
        let launched = inFlight.takeToLaunch().map(\.0.id)
        let again = inFlight.takeToLaunch()
        #expect(launched == ["a[0]", "a[1]"] && again.isEmpty, "each is launched once")
        #expect(inFlight.count == 2, "launched attempts are still in flight")
    }

    @Test func aResultIsTakenOnlyFromTheInstancesCurrentAttempt() {
        var inFlight = AttemptsInFlight()
        let a = ExecutorStateFixtures.instance("a[0]", kind: .item)
        let abandoned = attempt(&inFlight)
        inFlight.add(abandoned, of: a)
        _ = inFlight.takeToLaunch()
        // The first attempt was given up on (`abandon` hands in a result with its token) and a
        // second one started.
        let given = inFlight.complete(result("a[0]", abandoned))
        let retry = attempt(&inFlight)
        inFlight.add(retry, of: a)
        _ = inFlight.takeToLaunch()
        #expect(given === abandoned && retry.token > abandoned.token)
        // The plugin of the abandoned attempt returns after all: ignored, the retry stays in flight.
        let late = inFlight.complete(result("a[0]", abandoned))
        let otherInstance = inFlight.complete(result("a[1]", retry))
        #expect(late == nil && otherInstance == nil && inFlight.count == 1)
        let current = inFlight.complete(result("a[0]", retry))
        #expect(current === retry && inFlight.isEmpty)
    }
}
