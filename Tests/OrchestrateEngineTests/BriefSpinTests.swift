import Foundation
@testable import OrchestrateEngine
import Testing

/// `BriefSpin.gather`: how long the loop waits for the rest of a burst of completions.
@Suite struct BriefSpinTests {
    let clock = ContinuousClock()

    @Test func gatherReturnsOnceTheExpectedCountHasArrived() {
        var looks = 0
        let took = clock.measure {
            BriefSpin.gather(expected: 5, gap: 2, limit: 10) {
                looks += 1
                return min(looks / 10, 5)
            }
        }
        #expect(looks >= 50)
        #expect(took < .milliseconds(500), "it waited for the gap although all had arrived: \(took)")
    }

    @Test func gatherWaitsThroughGapsShorterThanTheGapAndStopsAfterALongerOne() {
        // One more arrives every 10 ms up to 3, then none: with a gap of 60 ms it sees all 3,
        // then stops about 60 ms after the last.
        let start = Date()
        var seen = 0
        let took = clock.measure {
            BriefSpin.gather(expected: 10, gap: 0.06, limit: 5) {
                seen = min(Int(Date().timeIntervalSince(start) / 0.01), 3)
                return seen
            }
        }
        #expect(seen == 3)
        #expect(took >= .milliseconds(80) && took < .milliseconds(1000), "\(took)")
    }

    @Test func gatherStopsAtItsLimitEvenWhileMoreKeepArriving() {
        var looks = 0
        let took = clock.measure {
            BriefSpin.gather(expected: .max, gap: 2, limit: 0.03) {
                looks += 1
                return looks
            }
        }
        #expect(took >= .milliseconds(30) && took < .milliseconds(1000), "\(took)")
    }
}
