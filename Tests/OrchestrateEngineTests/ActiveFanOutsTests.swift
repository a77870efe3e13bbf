@testable import OrchestrateEngine
import Testing

/// `ActiveFanOuts`: the fan-outs under way, oldest first, each once.
@Suite struct ActiveFanOutsTests {
    func fanOut(_ id: String) -> FanOut {
        FanOut(parent: ExecutorStateFixtures.instance(id, kind: .fanOut, status: .running), children: [], maxParallel: nil)
    }

    @Test func fanOutsStayInTheOrderTheyStartedEachOnce() {
        var fans = ActiveFanOuts()
        let first = fanOut("first")
        fans.add(first, for: "first")
        fans.add(fanOut("second"), for: "second")
        fans.add(fanOut("third"), for: "third")
        fans.remove("second")
        #expect(fans.stepIDs == ["first", "third"])
        #expect(fans["second"] == nil && fans["first"] === first)
        fans.add(fanOut("first"), for: "first")  // registered again: keeps its place
        #expect(fans.stepIDs == ["first", "third"])
        fans.remove("second")  // gone already: nothing changes
        fans.remove("first")
        fans.remove("third")
        #expect(fans.stepIDs.isEmpty)
    }
}
