@testable import OrchestrateEngine
import Testing

/// `StartQueue`: first in, first out, across its compactions.
@Suite struct StartQueueTests {
    @Test func takesElementsInTheOrderTheyCameAcrossCompactions() {
        var queue = StartQueue(Array(0 ..< 3000))
        var taken: [Int] = []
        var next = 3000
        // Take two, add one, so the taken ones pass the compaction threshold while others wait.
        while let first = queue.first {
            taken.append(first)
            queue.removeFirst()
            if taken.count % 2 == 0 && next < 4000 {
                queue.append(next)
                next += 1
            }
            #expect(queue.count == 3000 + (next - 3000) - taken.count)
        }
        #expect(taken == Array(0 ..< 4000))
        #expect(queue.isEmpty && queue.first == nil)
        queue.append(7)
        #expect(queue.first == 7 && queue.count == 1)
        queue.removeAll()
        #expect(queue.isEmpty)
    }
}
