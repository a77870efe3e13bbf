import Foundation
@testable import OrchestrateEngine
import OrchestrateLock
import Testing

/// `CheckpointSaves`: saves queued behind a write are written once, the newest of them; each
/// caller learns whether its save (or a later one) was written.
@Suite struct CheckpointSavesTests {
    /// A store whose writes wait until the test lets each go, recording what they were given,
    /// and the answer each save got.
    final class GatedStore: @unchecked Sendable {
        let saves = CheckpointSaves()
        private let lock = Lock()
        private var _written: [[UInt8]] = []
        private var _answers: [UInt8: Bool] = [:]
        private var failNext = false
        private let gate = DispatchSemaphore(value: 0)

        var written: [[UInt8]] { lock.withLock { _written } }
        var answers: [UInt8: Bool] { lock.withLock { _answers } }
        func letOneWriteGo(failing: Bool = false) {
            lock.withLock { failNext = failing }
            gate.signal()
        }

        func save(_ byte: UInt8) -> Bool {
            let ok = saves.save([byte]) { data in
                gate.wait()
                try lock.withLock {
                    if failNext { failNext = false; throw CocoaError(.fileWriteUnknown) }
                    _written.append(data)
                }
            }
            lock.withLock { _answers[byte] = ok }
            return ok
        }

        /// Saves `byte` on a thread of its own, once the saves started before it are in, so the
        /// order they arrive in is the order they were started in.
        func startSave(_ byte: UInt8) {
            let before = saves.callers
            Thread { [self] in _ = save(byte) }.start()
            while saves.callers == before { usleep(1000) }
        }

        func waitForAnswers(_ count: Int) {
            let deadline = Date().addingTimeInterval(10)
            while answers.count < count && Date() < deadline { usleep(1000) }
        }
    }

    @Test func savesQueuedBehindAWriteAreWrittenOnceTheNewestOfThem() {
        let store = GatedStore()
        store.startSave(0)  // being written, held
        for byte in UInt8(1) ... 7 { store.startSave(byte) }
        #expect(store.saves.callers == 8)
        store.letOneWriteGo()  // 0
        store.letOneWriteGo()  // one write for 1–7
        store.waitForAnswers(8)
        #expect(store.written == [[0], [7]], "the first save, then the newest of those waiting")
        #expect(store.saves.writes == 2)
        #expect(store.answers == Dictionary(uniqueKeysWithValues: (UInt8(0) ... 7).map { ($0, true) }))

        // Alone, a save is written as it comes.
        store.letOneWriteGo()
        #expect(store.save(8))
        #expect(store.written.last == [8] && store.saves.writes == 3)
    }

    @Test func aFailedWriteFailsTheSavesItCarriedAndNoOthers() {
        let store = GatedStore()
        store.startSave(0)
        for byte in UInt8(1) ... 3 { store.startSave(byte) }
        store.letOneWriteGo()  // 0 is written
        store.waitForAnswers(1)
        store.letOneWriteGo(failing: true)  // the write of 3, for 1–3, fails
        store.waitForAnswers(4)
        #expect(store.answers == [0: true, 1: false, 2: false, 3: false])
        store.letOneWriteGo()
        #expect(store.save(4), "the next save is answered by its own write")
        #expect(store.written == [[0], [4]])
    }

    /// A save that arrives while a write fails is not that write's: the next write carries it.
    @Test func aSaveArrivingDuringAFailingWriteGoesWithTheNext() {
        let store = GatedStore()
        store.startSave(0)  // its write will fail
        store.startSave(1)  // waiting behind it
        store.letOneWriteGo(failing: true)
        store.waitForAnswers(1)
        #expect(store.answers == [0: false])
        store.letOneWriteGo()
        store.waitForAnswers(2)
        #expect(store.answers == [0: false, 1: true])
        #expect(store.written == [[1]])
    }
}
