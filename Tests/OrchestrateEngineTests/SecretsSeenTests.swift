@testable import OrchestrateEngine
import Testing

/// `SecretsSeen`: every secret value a run resolved stays masked, a rotated one included.
@Suite struct SecretsSeenTests {
    @Test func everyValueEverLearnedStaysMasked() {
        var seen = SecretsSeen()
        #expect(seen.redactor.isEmpty)
        seen.learn(["token-one"])
        seen.learn(["token-two"])  // rotated between attempts: the old value may be in a late log line
        #expect(seen.redactor.redact("old token-one, new token-two") == "old ***, new ***")
    }

    @Test func learningOnlyKnownOrEmptyValuesChangesNothing() {
        var seen = SecretsSeen()
        seen.learn(["", "abc"])
        seen.learn(["abc"])
        seen.learn([String]())
        #expect(seen.redactor.redact("abc and an empty secret") == "*** and an empty secret")
    }
}
