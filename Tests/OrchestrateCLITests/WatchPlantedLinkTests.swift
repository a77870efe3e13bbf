import Foundation
import OrchestrateStore
import OrchestrateTestSupport
import Testing

/// A watched folder others write into: after a file was handed over, its subfolder is swapped
/// for a symbolic link to a folder holding a file of the same name, size and modification time
/// (the run does the swap itself, so the race is won every time). `after: delete` and
/// `after: move-to` used to follow the link, find a matching signature and delete or move the
/// victim; now the folders below the watched one are entered without following links, the
/// victim stays, and the hand-off says why.
@Suite(.serialized) struct WatchPlantedLinkTests {
    let h = Harness()

    @Test(arguments: ["delete", "move-to done"])
    func aSubfolderSwappedForALinkIsNotFollowedByAfter(after: String) throws {
        let outbox = h.path("outbox"), victim = h.path("victim")
        try FileManager.default.createDirectory(atPath: outbox + "/sub", withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: true)
        #expect(FileManager.default.createFile(atPath: victim + "/take.txt", contents: Data("precious".utf8)))
        #expect(FileManager.default.createFile(atPath: outbox + "/sub/take.txt", contents: Data("precious".utf8)))
        // The same modification time to the nanosecond: what an attacker can set on their own file.
        var times = [timespec(tv_sec: 1_700_000_000, tv_nsec: 123_456_789), timespec(tv_sec: 1_700_000_000, tv_nsec: 123_456_789)]
        #expect(utimensat(AT_FDCWD, victim + "/take.txt", &times, 0) == 0)
        #expect(utimensat(AT_FDCWD, outbox + "/sub/take.txt", &times, 0) == 0)
        let wf = h.workflow("""
            version: 1
            name: planted-link
            on:
              watch:
                path: outbox
                recursive: true
                settle: 200ms
                after: \(after)
            steps:
              swap:
                uses: exec
                with:
                  command: [sh, -c, 'mv "$1/sub" "$1/.old" && ln -s "$2" "$1/sub"', sh, "\(outbox)", "\(victim)"]
            """, name: "planted-link.yaml")
        let serve = try h.start(["serve", "--watch", wf, "--watch-poll"])
        defer { stop(serve) }
        let store = try h.openStore()
        #expect(h.waitFor(30) {
            let handOffs = (try? h.storeSQL("SELECT count(*) FROM watch_handoffs WHERE outcome = 'done'")) ?? ""
            return handOffs.trimmingCharacters(in: .whitespacesAndNewlines) == "1"
        }, "the hand-off did not finish")
        let runs = try store.listRuns(RunFilter())
        #expect(runs.count == 1 && runs.first?.status == .succeeded, "\(runs.map(\.status))")
        #expect((try? String(contentsOfFile: victim + "/take.txt", encoding: .utf8)) == "precious", "the victim was not touched")
        #expect(FileManager.default.fileExists(atPath: outbox + "/.old/take.txt"))
        #expect(!FileManager.default.fileExists(atPath: outbox + "/done/sub"))
        let events = try h.orchestrate(["events", try #require(runs.first?.id), "--json"])
        let finished = Harness.events(events).ofType("watch.finished").last?["data"]
        let done = finished?["after"]?.stringValue ?? ""
        #expect(done.hasPrefix("none: sub on the way to sub/take.txt is not a folder but a symbolic link"), "\(events.stdout)")
    }

    /// The move-to folder inside a shared outbox: planted beforehand as a link (towards a folder
    /// like ~/.ssh), or made beforehand by another user (theirs to fill with links), `serve`
    /// refuses the watch; swapped for a link while `serve` runs, nothing is moved through it.
    @Test func aMoveToFolderPlantedAsALinkReceivesNothing() throws {
        let outbox = h.path("outbox"), victim = h.path("victim")
        try FileManager.default.createDirectory(atPath: outbox, withIntermediateDirectories: true)
        try FileManager.default.createDirectory(atPath: victim, withIntermediateDirectories: true)
        let wf = h.workflow("""
            version: 1
            name: planted-move-to
            on:
              watch: { path: outbox, settle: 200ms, after: move-to done }
            steps:
              swap:
                uses: exec
                with: { command: [sh, -c, 'mv "$1/done" "$1/.done" && ln -s "$2" "$1/done"', sh, "\(outbox)", "\(victim)"] }
            """, name: "planted-move-to.yaml")

        #expect(symlink(victim, outbox + "/done") == 0 && lchown(outbox + "/done", 65534, 65534) == 0)
        let linked = try h.orchestrate(["serve", "--watch", wf])
        #expect(linked.status == 2 && linked.stderr.contains("cannot use the after: move-to folder \(outbox)/done: "
            + "done on the way to \(outbox)/done is not a folder but a symbolic link"), "\(linked.stderr)")
        #expect(unlink(outbox + "/done") == 0 && mkdir(outbox + "/done", 0o777) == 0 && chown(outbox + "/done", 65534, 65534) == 0)
        let theirs = try h.orchestrate(["serve", "--watch", wf])
        #expect(theirs.status == 2 && theirs.stderr.contains("the folder done on the way to \(outbox)/done belongs to another user (uid 65534)"),
                "\(theirs.stderr)")
        #expect(rmdir(outbox + "/done") == 0)

        #expect(FileManager.default.createFile(atPath: outbox + "/authorized_keys", contents: Data("ssh-ed25519 AAAA attacker".utf8)))
        let serve = try h.start(["serve", "--watch", wf, "--watch-poll"])
        defer { stop(serve) }
        #expect(h.waitFor(30) {
            ((try? h.storeSQL("SELECT count(*) FROM watch_handoffs WHERE outcome = 'done'")) ?? "").trimmingCharacters(in: .whitespacesAndNewlines) == "1"
        }, "the hand-off did not finish")
        #expect(try FileManager.default.contentsOfDirectory(atPath: victim).isEmpty, "nothing was moved through the link")
        #expect(FileManager.default.fileExists(atPath: outbox + "/authorized_keys"))
    }

    /// A file name with a line break and a terminal escape in it (anyone who can write the folder
    /// chooses it) cannot forge a line of `serve`'s log or drive the terminal reading it: the
    /// control characters are shown escaped.
    @Test func aFileNameCannotForgeALineOfServesLog() throws {
        let outbox = h.path("outbox")
        try FileManager.default.createDirectory(atPath: outbox, withIntermediateDirectories: true)
        let forged = "x\n12:00:00 payroll.csv settled: handed over as run r1\u{1B}[2J.txt"
        #expect(FileManager.default.createFile(atPath: outbox + "/" + forged, contents: Data("x".utf8)))
        let wf = noopWatch("forged-name", "{ path: outbox, settle: 200ms }")
        let serve = try servePollingWithItsLog(wf)
        defer { stop(serve) }
        #expect(h.waitFor(30) { h.read("serve.log").contains(" done (keep)") }, "\(h.read("serve.log"))")
        let text = h.read("serve.log")
        #expect(!text.split(separator: "\n").contains { $0.hasPrefix("12:00:00 payroll.csv") }, "\(text)")
        #expect(!text.unicodeScalars.contains("\u{1B}"), "no raw escape")
        #expect(text.contains("x\\u{a}12:00:00 payroll.csv settled: handed over as run r1\\u{1b}[2J.txt settled: handed over as run"), "\(text)")
    }

    /// Folders moved out of a recursive watch, and the folders inside them, are no longer
    /// watched where they went: each such
    /// watch counted against the user's inotify limit for as long as `serve` ran, so a neighbour
    /// making and moving away folders could use it up. Counted from the kernel's side
    /// (/proc/PID/fdinfo of serve's inotify descriptor).
    @Test func aFolderMovedOutOfTheWatchIsNoLongerWatched() throws {
        let outbox = h.path("outbox")
        try FileManager.default.createDirectory(atPath: outbox, withIntermediateDirectories: true)
        let wf = noopWatch("moved-out", "{ path: outbox, recursive: true, settle: 200ms }")
        let serve = try h.start(["serve", "--watch", wf])
        defer { stop(serve) }
        let pid = serve.processIdentifier
        #expect(h.waitFor(20) { Self.inotifyWatches(pid) == 1 }, "\(Self.inotifyWatches(pid))")
        // Nested: the folders inside a moved one hear nothing of the move.
        for i in 0 ..< 5 { #expect(mkdir(outbox + "/d\(i)", 0o755) == 0 && mkdir(outbox + "/d\(i)/inner", 0o755) == 0) }
        #expect(h.waitFor(20) { Self.inotifyWatches(pid) == 11 }, "\(Self.inotifyWatches(pid))")
        for i in 0 ..< 5 { #expect(rename(outbox + "/d\(i)", h.path("away-\(i)")) == 0) }
        #expect(h.waitFor(20) { Self.inotifyWatches(pid) == 1 }, "still watched: \(Self.inotifyWatches(pid))")
    }

    /// A watched folder that goes away (an unmounted share, a rename) is said once, and once
    /// when it is back, and the files that arrive then are handed over; it used to go silent.
    @Test(arguments: [true, false]) func aWatchedFolderThatGoesAwayIsSaidOnceAndWatchedAgainWhenBack(poll: Bool) throws {
        let outbox = h.path("outbox")
        try FileManager.default.createDirectory(atPath: outbox, withIntermediateDirectories: true)
        let wf = noopWatch("goes-away", "{ path: outbox, settle: 200ms }")
        let serve = try StartedProcess(["/bin/sh", "-c", "exec \"$0\" \"$@\" > '\(h.path("serve.log"))' 2>&1", TestPaths.orchestrate.path,
                                        "serve", "--watch", wf] + (poll ? ["--watch-poll"] : []) + h.baseArguments)
        defer { stop(serve) }
        #expect(FileManager.default.createFile(atPath: outbox + "/a.txt", contents: Data("a".utf8)))
        #expect(h.waitFor(30) { h.read("serve.log").contains("a.txt settled") }, "\(h.read("serve.log"))")
        #expect(rename(outbox, h.path("outbox.away")) == 0)
        #expect(h.waitFor(30) { h.read("serve.log").contains("the watched folder cannot be opened") }, "\(h.read("serve.log"))")
        Thread.sleep(forTimeInterval: 2)
        #expect(rename(h.path("outbox.away"), outbox) == 0)
        #expect(h.waitFor(30) { h.read("serve.log").contains("the watched folder can be opened again") }, "\(h.read("serve.log"))")
        #expect(FileManager.default.createFile(atPath: outbox + "/b.txt", contents: Data("b".utf8)))
        #expect(h.waitFor(30) { h.read("serve.log").contains("b.txt settled") }, "\(h.read("serve.log"))")
        #expect(h.read("serve.log").components(separatedBy: "cannot be opened").count == 2, "said once: \(h.read("serve.log"))")
    }

    /// A workflow named `name` whose `on.watch` is `watch` (a flow mapping) and whose one step
    /// does nothing: these tests are about what the watch does around it.
    func noopWatch(_ name: String, _ watch: String) -> String {
        h.workflow("version: 1\nname: \(name)\non:\n  watch: \(watch)\nsteps:\n  noop: { uses: exec, with: { command: [\"true\"] } }\n",
                   name: "\(name).yaml")
    }

    func stop(_ serve: StartedProcess) {
        kill(serve.processIdentifier, SIGTERM)
        serve.waitUntilExit()
    }

    /// `serve --watch WORKFLOW --watch-poll`, its stdout and stderr in `serve.log` (what a
    /// terminal or a log file would receive).
    func servePollingWithItsLog(_ workflow: String) throws -> StartedProcess {
        try StartedProcess(["/bin/sh", "-c", "exec \"$0\" \"$@\" > '\(h.path("serve.log"))' 2>&1", TestPaths.orchestrate.path,
                            "serve", "--watch", workflow, "--watch-poll"] + h.baseArguments)
    }

    /// The watches of `pid`'s inotify descriptors, as the kernel lists them.
    static func inotifyWatches(_ pid: Int32) -> Int {
        let fds = (try? FileManager.default.contentsOfDirectory(atPath: "/proc/\(pid)/fd")) ?? []
        var count = 0
        for fd in fds where (try? FileManager.default.destinationOfSymbolicLink(atPath: "/proc/\(pid)/fd/\(fd)")) == "anon_inode:inotify" {
            let info = (try? String(contentsOfFile: "/proc/\(pid)/fdinfo/\(fd)", encoding: .utf8)) ?? ""
            count += info.split(separator: "\n").filter { $0.hasPrefix("inotify wd:") }.count
        }
        return count
    }

    /// An `after:` action that keeps failing for one file (here a move whose free name `NAME.1`
    /// is longer than a name may be: ENAMETOOLONG, even for root) neither holds up the files
    /// after it nor fills the log: the others are moved, the failing one is said once and tried
    /// again, and moved once it can be.
    @Test func oneFailingAfterDoesNotHoldUpTheOthers() throws {
        let outbox = h.path("outbox")
        try FileManager.default.createDirectory(atPath: outbox + "/done", withIntermediateDirectories: true)
        let long = String(repeating: "a", count: 255)
        #expect(FileManager.default.createFile(atPath: outbox + "/" + long, contents: Data("first".utf8)))
        #expect(FileManager.default.createFile(atPath: outbox + "/done/" + long, contents: Data("taken".utf8)))
        let wf = noopWatch("failing-after", "{ path: outbox, settle: 200ms, after: move-to done }")
        let serve = try servePollingWithItsLog(wf)
        defer { stop(serve) }
        // The failing one first, so its hand-off is the oldest of the pass.
        #expect(h.waitFor(20) { h.read("serve.log").contains("could not apply 'after'") }, "\(h.read("serve.log"))")
        #expect(FileManager.default.createFile(atPath: outbox + "/b.txt", contents: Data("second".utf8)))
        #expect(h.waitFor(20) { FileManager.default.fileExists(atPath: outbox + "/done/b.txt") }, "\(h.read("serve.log"))")
        Thread.sleep(forTimeInterval: 2.5)
        let warnings = h.read("serve.log").components(separatedBy: "could not apply 'after'").count - 1
        #expect(warnings == 1, "\(h.read("serve.log"))")
        #expect(h.read("serve.log").contains("File name too long"), "\(h.read("serve.log"))")
        // Once the name is free, the next pass moves it.
        // Tried again 1, 2, 4, 8… s apart: within a minute of the first failure.
        #expect(unlink(outbox + "/done/" + long) == 0)
        #expect(h.waitFor(60) { FileManager.default.fileExists(atPath: outbox + "/done/" + long) }, "\(h.read("serve.log"))")
    }
}
