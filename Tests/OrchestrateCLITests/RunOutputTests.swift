import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// `orchestrate run`'s lines are written in batches by a thread of their own (RunPrinter,
/// BatchedWriter): none may be lost or reordered, the last ones must be out before the summary,
/// and a line must show while the engine waits, not only when the next batch comes.
@Suite struct RunOutputTests {
    let h = Harness()

    func chain(_ n: Int) -> String {
        var lines = ["version: 1", "name: lines", "steps:", "  s0: { uses: test.noop }"]
        for i in 1..<n { lines.append("  s\(i): { uses: test.noop, needs: [s\(i - 1)] }") }
        return h.workflow(lines.joined(separator: "\n") + "\n")
    }

    @Test func everyStepLineInOrderThenTheSummary() throws {
        let n = 400
        let result = try h.orchestrate(["run", chain(n)])
        #expect(result.status == 0, "\(result.stderr)")
        let lines = result.stdout.split(separator: "\n").map(String.init)
        // "[   0.1s] s12            started" → "s12 started"
        let transitions = lines.compactMap { line -> String? in
            let words = line.split(separator: "]", maxSplits: 1).last?.split(separator: " ") ?? []
            guard words.count >= 2, words[0].hasPrefix("s") else { return nil }
            return "\(words[0]) \(words[1])"
        }
        let expected = (0..<n).flatMap { ["s\($0) started", "s\($0) succeeded"] }
        #expect(transitions == expected)
        let last = try #require(lines.last)
        #expect(last.hasPrefix("run ") && last.hasSuffix("(\(n) succeeded)"), "the summary comes last: \(last)")
    }

    @Test func jsonEventsAllWrittenInJournalOrder() throws {
        let n = 300
        let result = try h.orchestrate(["run", chain(n), "--json"])
        #expect(result.status == 0, "\(result.stderr)")
        let events = Harness.events(result)
        // (The observer's events carry no seq: the journal numbers them; their times are in order.)
        let times = events.compactMap { $0["time"]?.doubleValue }
        #expect(times.count == events.count && times == times.sorted())
        #expect(events.ofType("step.started").compactMap { $0["step"]?.stringValue } == (0..<n).map { "s\($0)" })
        #expect(events.ofType("step.succeeded").compactMap { $0["step"]?.stringValue } == (0..<n).map { "s\($0)" })
        #expect(events.last?["type"]?.stringValue == "run.finished")
    }

    @Test func aStepsStartShowsWhileItRuns() throws {
        let file = h.workflow("""
            version: 1
            name: prompt
            steps:
              first: { uses: test.noop }
              slow: { uses: test.sleep, needs: [first], with: { ms: 10000 } }
            """)
        let out = h.path("stdout")
        let child = try SpawnedChild([TestPaths.orchestrate.path, "run", file] + h.baseArguments,
                                     stdout: out, stderr: h.path("stderr"))
        let started = Date()
        // Nothing else happens for 10 s after `slow` starts: its line must not wait for a next
        // batch. (8 s leaves a loaded machine time to start the process and run `first`.)
        let shown = h.waitFor(8) { h.lines("stdout").contains { $0.contains("slow") && $0.contains("started") } }
        let waited = Date().timeIntervalSince(started)
        #expect(shown, "after \(waited) s: \(h.read("stdout"))")
        #expect(child.poll() == nil, "the run was still going when the line showed")
        #expect(child.wait(timeout: 30) == 0)
        #expect(h.read("stdout").contains("slow           succeeded"))
    }

    /// A stdout nobody reads (a pipe whose reader stopped, Ctrl-S on a terminal) blocks the
    /// writer thread in write(2); Ctrl-C twice must still exit (130), not wait on it forever.
    @Test func twoInterruptsExitWhileStdoutIsBlocked() throws {
        var lines = ["version: 1", "name: chatty", "steps:", "  s0: { uses: test.noop }"]
        for i in 1..<2000 { lines.append("  s\(i): { uses: test.noop, needs: [s\(i - 1)] }") }
        lines.append("  last: { uses: test.sleep, needs: [s1999], with: { ms: 60000 } }")
        let file = h.workflow(lines.joined(separator: "\n") + "\n")
        let fifo = h.path("stdout.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        // The read end stays open and is never read: 4,000 lines fill the pipe's 64 KiB.
        let reader = open(fifo, O_RDONLY | O_NONBLOCK)
        #expect(reader >= 0)
        defer { close(reader) }
        let child = try SpawnedChild([TestPaths.orchestrate.path, "run", file] + h.baseArguments,
                                     stdout: fifo, stderr: h.path("stderr"))
        // The run is at its last step (the journal shows it started), with the output blocked.
        #expect(h.waitFor(60) { Self.lastStarted(h) }, "stderr: \(h.read("stderr"))")
        kill(child.pid, SIGINT)
        Thread.sleep(forTimeInterval: 0.5)
        kill(child.pid, SIGINT)
        #expect(child.wait(timeout: 15) == 130, "stderr: \(h.read("stderr"))")
    }

    /// While stdout takes no lines, the queue of lines waiting for it is bounded (8,192): the
    /// run pauses rather than holding every line in memory; once stdout is read again the run
    /// goes on, and no line is lost.
    @Test func aBlockedStdoutPausesTheRunInsteadOfQueueingWithoutBound() throws {
        let n = 6000  // 12,000 lines: more than the queue and the pipe's 64 KiB hold
        let fifo = h.path("stdout.fifo")
        #expect(mkfifo(fifo, 0o600) == 0)
        let reader = open(fifo, O_RDONLY | O_NONBLOCK)
        #expect(reader >= 0)
        defer { close(reader) }
        let child = try SpawnedChild([TestPaths.orchestrate.path, "run", chain(n)] + h.baseArguments,
                                     stdout: fifo, stderr: h.path("stderr"))
        // The journal stops growing short of the end while nobody reads.
        var done = -1
        let paused = h.waitFor(60) {
            Thread.sleep(forTimeInterval: 1)
            let now = Self.succeededSteps(h)
            defer { done = now }
            return now > 0 && now == done
        }
        #expect(paused && done < n, "\(done) of \(n) steps done; stderr: \(h.read("stderr"))")
        #expect(child.poll() == nil, "the run waits for its output")
        // Read everything: the run finishes, every line there.
        _ = fcntl(reader, F_SETFL, 0)
        var output: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let count = read(reader, &buffer, buffer.count)
            if count <= 0 { break }
            output += buffer[0..<count]
        }
        #expect(child.wait(timeout: 60) == 0, "stderr: \(h.read("stderr"))")
        let text = String(decoding: output, as: UTF8.self)
        #expect(text.split(separator: "\n").filter { $0.contains("succeeded") }.count == n + 1)  // steps and the summary
    }

    static func succeededSteps(_ h: Harness) -> Int {
        guard let result = try? h.orchestrate(["list", "--json"]),
              let id = result.stdout.split(separator: "\n").first.flatMap({ try? JSONValue(parsing: String($0)) })?["id"]?.stringValue,
              let events = try? h.orchestrate(["events", id, "--json"]) else { return 0 }
        return Harness.events(events).filter { $0["type"]?.stringValue == "step.succeeded" }.count
    }

    static func lastStarted(_ h: Harness) -> Bool {
        guard let result = try? h.orchestrate(["list", "--json"]),
              let id = result.stdout.split(separator: "\n").first.flatMap({ try? JSONValue(parsing: String($0)) })?["id"]?.stringValue,
              let events = try? h.orchestrate(["events", id, "--json"]) else { return false }
        return Harness.events(events).contains { $0["type"]?.stringValue == "step.started" && $0["step"]?.stringValue == "last" }
    }

    @Test func listHasAHeaderRowAboveItsRuns() throws {
        let empty = try h.orchestrate(["list"])
        #expect(empty.status == 0 && empty.stdout.isEmpty, "no runs, no header: \(empty.stdout)")
        #expect(try h.orchestrate(["run", chain(1)]).status == 0)
        let lines = try h.orchestrate(["list"]).stdout.split(separator: "\n").map(String.init)
        #expect(lines.count == 2, "\(lines)")
        let header = lines.first?.split(separator: " ").map(String.init) ?? []
        #expect(header == ["ID", "STATUS", "WORKFLOW", "CREATED", "QUEUE", "NODE"], "\(lines)")
        // Each column starts where its name does.
        let row = Array(lines.last ?? "")
        for name in ["STATUS", "WORKFLOW"] {
            guard let start = lines.first?.range(of: name) else { continue }  // reported above
            let column = lines[0].distance(from: lines[0].startIndex, to: start.lowerBound)
            #expect(row.count > column && row[column - 1] == " " && row[column] != " ", "\(name) column: \(lines)")
        }
    }
}

/// A step's error and log text come from servers and plugins: `run`, `status` and `list` show
/// its control characters escaped, so an ESC sequence cannot drive the terminal nor a newline
/// forge a line ("… run x succeeded"); `--json` keeps the text exact.
@Suite struct HostileTextOutputTests {
    let h = Harness()

    @Test func controlCharactersInAnErrorAreEscapedOnTheTerminal() throws {
        let file = h.workflow("""
            version: 1
            name: hostile
            steps:
              upload: { uses: test.fail, retry: { max_attempts: 1 }, with: { kind: permanent, message: "denied\\e]0;pwn\\a\\n[   9.9s] upload         succeeded" } }
            """)
        let result = try h.orchestrate(["run", file, "--id", "hostile1", "--label", "note=a\u{1B}[8mb"])
        #expect(result.status != 0)
        #expect(!result.stdout.contains("\u{1B}") && !result.stdout.contains("\u{07}"), "\(result.stdout.debugDescription)")
        #expect(result.stdout.contains("denied\\u{1b}]0;pwn\\u{7}\\u{a}[   9.9s] upload"), "\(result.stdout.debugDescription)")
        #expect(!result.stdout.split(separator: "\n").contains { $0.hasPrefix("[   9.9s]") }, "a line was forged")

        let status = try h.orchestrate(["status", "hostile1"])
        #expect(!status.stdout.contains("\u{1B}") && status.stdout.contains("denied\\u{1b}]0;pwn"), "\(status.stdout.debugDescription)")
        #expect(status.stdout.contains("note=a\\u{1b}[8mb"), "\(status.stdout.debugDescription)")

        let json = try h.orchestrate(["status", "hostile1", "--json"])
        let document = try JSONValue(parsing: json.stdout)
        let error = document["steps"]?.arrayValue?.first?["error"]?.stringValue ?? ""
        #expect(error.contains("denied\u{1B}]0;pwn\u{07}\n"), "--json keeps the text exact: \(error.debugDescription)")
    }
}
