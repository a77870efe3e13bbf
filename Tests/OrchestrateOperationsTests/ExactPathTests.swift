import OrchestrateExactPath
import Testing

/// ExactPath compares, hashes and tests prefixes by bytes, where String goes by Unicode
/// equivalence.
@Suite struct ExactPathTests {
    let precomposed = "/srv/caf\u{E9}", decomposed = "/srv/cafe\u{301}"

    @Test func equivalentNamesAreDifferentPaths() {
        #expect(precomposed == decomposed)
        #expect(ExactPath(precomposed) != ExactPath(decomposed))
        #expect(Set([ExactPath(precomposed), ExactPath(decomposed)]).count == 2)
        #expect(ExactPath(precomposed) == ExactPath("/srv/caf\u{E9}"))
        #expect(ExactPath(precomposed).hashValue == ExactPath("/srv/caf\u{E9}").hashValue)
    }

    @Test func insideIsByBytes() {
        #expect(decomposed.hasPrefix(precomposed))
        #expect(!ExactPath(decomposed + "/x").isInside(ExactPath(precomposed)))
        #expect(!ExactPath(decomposed).isInside(ExactPath(precomposed)))
        #expect(ExactPath(precomposed + "/x").isInside(ExactPath(precomposed)))
        #expect(ExactPath(precomposed).isInside(ExactPath(precomposed)))
        #expect(!ExactPath(precomposed + "x").isInside(ExactPath(precomposed)))
        #expect(ExactPath("/anything").isInside(ExactPath("/")))
        #expect(!ExactPath("relative").isInside(ExactPath("/")))
    }

    @Test func droppingAPrefixKeepsTheRestsBytes() {
        let key = ExactPath("p/" + "cafe\u{301}/x")
        #expect(key.hasPrefix(ExactPath("p/")))
        #expect(Array(key.dropping(ExactPath("p/")).utf8) == Array("cafe\u{301}/x".utf8))
    }
}
