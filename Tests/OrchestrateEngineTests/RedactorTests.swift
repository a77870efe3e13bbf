import OrchestrateJSON
import Testing

@testable import OrchestrateEngine

/// Secrets are masked wherever their bytes appear: String's own search goes by characters, and a
/// secret followed by a combining mark, or preceded by a prepend character, hides inside another
/// character there.
@Suite struct RedactorTests {
    let redactor = Redactor(secrets: ["s3cr3t", "tok", ""])

    @Test func aSecretIsMaskedWhateverFollowsOrPrecedesIt() {
        #expect(redactor.redact("key=s3cr3t;") == "key=***;")
        #expect(redactor.redact("key=s3cr3t\u{301} next") == "key=***\u{301} next")
        #expect(redactor.redact("\u{600}s3cr3t") == "\u{600}***")
        #expect(redactor.redact("s3cr3ts3cr3t") == "******")
        #expect(redactor.redact("nothing here") == "nothing here")
        #expect(redactor.redact("") == "")
    }

    @Test func theLongerSecretIsMaskedWhole() {
        let nested = Redactor(secrets: ["abc", "abcdef"])
        #expect(nested.redact("x abcdef y abc") == "x *** y ***")
    }

    @Test func jsonStringsAreMasked() {
        let value: JSONValue = ["body": "token tok\u{301}en", "n": 1]
        #expect(redactor.redact(value) == ["body": "***en ***\u{301}en", "n": 1])
    }
}
