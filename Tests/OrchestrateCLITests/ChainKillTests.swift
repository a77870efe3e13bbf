import Foundation
import OrchestrateTestSupport
import Testing

/// `kill -9` of the real `orchestrate run` (then of each `orchestrate resume`) at random points
/// of a long chain of `test.append` steps, each appending its index to one file, until the run
/// finishes. What the journal promises, checked after every kill and at the end:
///
/// - a step's start is durable before its effect: every index in the file belongs to a step the
///   journal shows started (running or succeeded);
/// - a step's success is durable only after its effect, and before its dependant starts: every
///   succeeded step's index is in the file, and in the file the indexes are in chain order with
///   repeats only back to back (a repeat elsewhere would be a step run again after its success
///   let the next one start);
/// - each step succeeded exactly once (one `step.succeeded` event each), re-run only when a kill
///   caught it running (at most one re-run per kill, and only steps with a second attempt);
/// - the SQLite file passes `PRAGMA integrity_check`.
///
/// The same for a wide fan-out, whose rounds each commit several items' starts and successes.
///
/// 2,000 steps and 6 kills by default, to stay well under a minute in a debug build on CI's two
/// busy cores (4,000 took 50 s there: a debug build runs a step several times slower than a
/// release one, and every resume reloads the journal); ORCHESTRATE_CHAIN_KILL_STEPS=10000 runs
/// the bench's chain. The seed is printed; ORCHESTRATE_CHAIN_KILL_SEED repeats it.
@Suite(.serialized) struct ChainKillTests {
    let h = Harness()

    @Test func killedAtRandomPointsOfALongChainEveryStepSucceedsOnceAndRunsInOrder() throws {
        let (steps, kills, seed) = Self.setting("chain")

        let out = h.path("out")
        var yaml = "version: 1\nname: long-chain\nsteps:\n"
        for i in 0 ..< steps {
            let needs = i == 0 ? "" : "needs: [s\(i - 1)], "
            yaml += "  s\(i): { uses: test.append, \(needs)with: { file: \"\(out)\", line: \"\(i)\" } }\n"
        }
        let file = h.workflow(yaml)

        let (id, killed) = try killAndResume(file, lines: steps, kills: kills, seed: seed) { moment in
            try checkJournalAgainstFile(seed: seed, after: moment)
        }

        #expect(try h.status(id)["status"]?.stringValue == "succeeded")
        #expect(try h.storeSQL("SELECT count(*) FROM steps WHERE status = 'succeeded'") == "\(steps)")
        #expect(try h.storeSQL("SELECT count(*) FROM events WHERE type = 'step.succeeded'") == "\(steps)",
                "seed \(seed): a step succeeded twice")
        #expect(try h.storeSQL("SELECT count(DISTINCT step) FROM events WHERE type = 'step.succeeded'") == "\(steps)")
        try checkJournalAgainstFile(seed: seed, after: "the end")

        // The file: 0, 1, 2, … in chain order, a repeat only right after itself.
        let indexes = h.lines("out").compactMap { Int($0) }
        var collapsed: [Int] = []
        var repeated: [Int] = []
        for index in indexes {
            if collapsed.last == index { repeated.append(index) } else { collapsed.append(index) }
        }
        #expect(collapsed == Array(0 ..< steps), "seed \(seed): the steps' effects are out of chain order")
        #expect(repeated.count <= killed, "seed \(seed): \(repeated.count) repeats for \(killed) kills: \(repeated)")
        let reattempted = try h.storeSQL("SELECT id FROM steps WHERE attempt > 1").split(separator: "\n")
            .compactMap { Int($0.dropFirst()) }
        #expect(Set(repeated).isSubset(of: Set(reattempted)), "seed \(seed): repeated \(repeated), re-attempted \(reattempted)")
        #expect(reattempted.count <= killed, "seed \(seed): \(reattempted.count) steps re-attempted for \(killed) kills")
        if h.storeURL == nil {
            #expect(try h.storeSQL("PRAGMA integrity_check") == "ok")
        }
        print("chain kill seed \(seed): \(steps) steps, \(killed) kills, \(repeated.count) effects repeated")
    }

    /// A fan-out (`for_each`) of `test.append` items, killed the same way: an item's effect
    /// comes only after its start is durable, its success only after its effect; at the end
    /// every item succeeded once.
    @Test func killedAtRandomPointsOfAFanOutEveryItemSucceedsOnce() throws {
        let (items, kills, seed) = Self.setting("fan-out")

        let file = h.workflow("""
            version: 1
            name: wide-fan-out
            steps:
              wide:
                uses: test.append
                for_each: [\((0 ..< items).map { "\"\($0)\"" }.joined(separator: ", "))]
                with: { file: "\(h.path("out"))", line: "${{ item }}" }
            """)
        // The engine's default `--max-parallel`: at most that many items run at a kill.
        let parallel = ProcessInfo.processInfo.activeProcessorCount * 4
        let (id, killed) = try killAndResume(file, lines: items, kills: kills, seed: seed) { moment in
            let inFile = Set(h.lines("out").compactMap { Int($0) })
            let started = try journaledItems("'running', 'succeeded'")
            let succeeded = try journaledItems("'succeeded'")
            #expect(inFile.subtracting(started).isEmpty,
                    "seed \(seed), \(moment): effects of items not journaled as started: \(inFile.subtracting(started).sorted().prefix(10))")
            #expect(succeeded.subtracting(inFile).isEmpty,
                    "seed \(seed), \(moment): items journaled as succeeded without their effect: \(succeeded.subtracting(inFile).sorted().prefix(10))")
            #expect(started.subtracting(succeeded).count <= parallel, "seed \(seed), \(moment): \(started.subtracting(succeeded).count) running")
        }

        #expect(try h.status(id)["status"]?.stringValue == "succeeded")
        let unfinished = Set(0 ..< items).subtracting(try journaledItems("'succeeded'"))
        #expect(unfinished.isEmpty, "seed \(seed): items not succeeded: \(unfinished.sorted().prefix(10))")
        #expect(try h.storeSQL("SELECT count(*) FROM events WHERE type = 'step.succeeded' AND step LIKE 'wide[%'") == "\(items)",
                "seed \(seed): an item succeeded twice")
        #expect(try h.storeSQL("SELECT count(DISTINCT step) FROM events WHERE type = 'step.succeeded' AND step LIKE 'wide[%'") == "\(items)")
        // Each index in the file at least once; more only for items a kill caught running.
        let indexes = h.lines("out").compactMap { Int($0) }
        let missing = Set(0 ..< items).subtracting(indexes)
        #expect(missing.isEmpty, "seed \(seed): items without their effect: \(missing.sorted().prefix(10))")
        let reattempted = Int(try h.storeSQL("SELECT count(*) FROM steps WHERE kind = 'item' AND attempt > 1")) ?? -1
        #expect(indexes.count - items <= reattempted, "seed \(seed): \(indexes.count - items) repeats, \(reattempted) items re-attempted")
        #expect(reattempted <= killed * parallel, "seed \(seed): \(reattempted) items re-attempted for \(killed) kills")
        if h.storeURL == nil {
            #expect(try h.storeSQL("PRAGMA integrity_check") == "ok")
        }
        print("fan-out kill seed \(seed): \(items) items, \(killed) kills, \(indexes.count - items) effects repeated")
    }

    /// How many steps (ORCHESTRATE_CHAIN_KILL_STEPS, default 2,000), kills and the seed
    /// (ORCHESTRATE_CHAIN_KILL_SEED, printed, default random), with libc's generator seeded so
    /// the kill schedule repeats.
    static func setting(_ test: String) -> (steps: Int, kills: Int, seed: UInt64) {
        let environment = ProcessInfo.processInfo.environment
        let steps = environment["ORCHESTRATE_CHAIN_KILL_STEPS"].flatMap { Int($0) } ?? 2000
        let seed = environment["ORCHESTRATE_CHAIN_KILL_SEED"].flatMap { UInt64($0) } ?? UInt64.random(in: 1 ... 1 << 40)
        print("\(test) kill seed \(seed) (repeat with ORCHESTRATE_CHAIN_KILL_SEED=\(seed))")
        srand48(Int(truncatingIfNeeded: seed))
        return (steps, 6, seed)
    }

    /// The fan-out's items journaled with one of `statuses`, by index.
    func journaledItems(_ statuses: String) throws -> Set<Int> {
        Set(try h.storeSQL("SELECT item_index FROM steps WHERE kind = 'item' AND status IN (\(statuses))")
            .split(separator: "\n").compactMap { Int($0) })
    }

    /// `orchestrate run FILE`, killed (`kill -9`) once the file `out` has reached each of
    /// `kills` random line counts below `lines` (plus 0-2 ms), then `orchestrate resume` killed
    /// the same way, and a last resume that must finish the run. `check` runs after each kill,
    /// with no process running. Returns the run's id and how many kills landed.
    func killAndResume(_ file: String, lines: Int, kills: Int, seed: UInt64,
                       check: (_ moment: String) throws -> Void) throws -> (runID: String, killed: Int)
    {
        let targets = (0 ..< kills).map { _ in 1 + Int(drand48() * Double(lines - 1)) }.sorted()
        var runID: String?
        var killed = 0
        for target in targets {
            let process = try h.start(runID.map { ["resume", $0] } ?? ["run", file])
            let reached = h.waitFor(60) { h.lines("out").count >= target || !process.isRunning }
            usleep(UInt32(drand48() * 2000))
            if process.isRunning {
                kill(process.processIdentifier, SIGKILL)
                killed += 1
            }
            process.waitUntilExit()
            #expect(reached, "seed \(seed): the run did not reach \(target) lines in 60 s")
            if runID == nil { runID = try h.runIDs().first }
            try check("kill \(killed) at ~\(target) lines")
        }
        let id = try #require(runID)
        let final = try h.orchestrate(["resume", id])
        #expect(final.status == 0, "seed \(seed): \(final.stdout.suffix(2000))\n\(final.stderr.suffix(2000))")
        #expect(killed >= kills - 1, "seed \(seed): only \(killed) kills landed (the run finished first)")
        return (id, killed)
    }

    /// With no process running: the file's indexes all belong to steps journaled as started, and
    /// every step journaled as succeeded has its index in the file.
    func checkJournalAgainstFile(seed: UInt64, after moment: String) throws {
        let inFile = Set(h.lines("out").compactMap { Int($0) })
        func journaled(_ statuses: String) throws -> Set<Int> {
            Set(try h.storeSQL("SELECT id FROM steps WHERE status IN (\(statuses))").split(separator: "\n")
                .compactMap { Int($0.dropFirst()) })
        }
        let started = try journaled("'running', 'succeeded'")
        let succeeded = try journaled("'succeeded'")
        #expect(inFile.isSubset(of: started),
                "seed \(seed), \(moment): effects of steps not journaled as started: \(inFile.subtracting(started).sorted().prefix(10))")
        #expect(succeeded.isSubset(of: inFile),
                "seed \(seed), \(moment): steps journaled as succeeded without their effect: \(succeeded.subtracting(inFile).sorted().prefix(10))")
        // A chain runs one step at a time: at most one started and not succeeded.
        #expect(started.subtracting(succeeded).count <= 1, "seed \(seed), \(moment): \(started.subtracting(succeeded).sorted())")
    }
}
