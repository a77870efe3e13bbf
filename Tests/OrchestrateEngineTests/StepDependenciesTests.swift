@testable import OrchestrateEngine
import Testing

/// `StepDependencies`: the counts that decide when a declared step's needs are all finished.
@Suite struct StepDependenciesTests {
    /// a → b, c → d (a diamond), and e needing nothing.
    let workflow = ExecutorStateFixtures.workflow("""
          a: { uses: test.noop }
          b: { uses: test.noop, needs: [a] }
          c: { uses: test.noop, needs: [a] }
          d: { uses: test.noop, needs: [b, c] }
          e: { uses: test.noop }

        """)

    @Test func aStepIsReadyOnceWhenItsLastNeedFinishes() {
        var dependencies = StepDependencies(workflow: workflow)
        for (step, needs) in [("a", 0), ("b", 1), ("c", 1), ("d", 2), ("e", 0)] {
            dependencies.track(step, unfinishedNeeds: needs)
        }
        #expect(dependencies.dependents(of: "a") == ["b", "c"])
        var ready: [String] = []
        dependencies.finished("a", ready: &ready)
        #expect(ready == ["b", "c"])
        dependencies.finished("b", ready: &ready)
        #expect(ready == ["b", "c"] && !dependencies.needsMet("d"), "d still waits for c")
        dependencies.finished("c", ready: &ready)
        #expect(ready == ["b", "c", "d"] && dependencies.needsMet("d"))
        #expect(!dependencies.allFinished)
        dependencies.finished("d", ready: &ready)
        dependencies.finished("e", ready: &ready)
        #expect(dependencies.allFinished)
        #expect(ready == ["b", "c", "d"], "steps with nothing waiting on them make nothing ready")
    }

    @Test func aResumedRunTracksOnlyItsUnfinishedStepsAndNeverReadiesAFinishedOne() {
        // Resumed after a and b succeeded: c and d are left, c's need already met.
        var dependencies = StepDependencies(workflow: workflow)
        dependencies.track("c", unfinishedNeeds: 0)
        dependencies.track("d", unfinishedNeeds: 1)
        var ready: [String] = []
        dependencies.finished("c", ready: &ready)
        #expect(ready == ["d"])
        #expect(dependencies.needsMet("b"), "a step not tracked has nothing to wait for")
        // A step finishing twice would not make its dependents ready twice (nor the count negative).
        dependencies.finished("c", ready: &ready)
        #expect(ready == ["d"])
    }
}
