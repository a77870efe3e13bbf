import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// What a person at a terminal sees, through a real terminal (tmux): progress bars redrawn in
/// place with rate and ETA, erased when the step is done, colour only without NO_COLOR.
@Suite(.serialized) struct TerminalTests {
    let h = Harness()
    /// Runs `orchestrate run` in a COLUMNS×30 tmux session (`TmuxSession`).
    func startInTmux(environment: String = "-u NO_COLOR", columns: Int = 120) throws -> TmuxSession {
        let pluginDir = h.dir.file("progress-plugin")
        try FileManager.default.createDirectory(at: pluginDir, withIntermediateDirectories: true)
        _ = try CCompiler.buildFixture("progress", into: pluginDir)
        let file = h.workflow("""
            version: 1
            name: progress
            steps:
              upload: { uses: test.progress, with: { bytes: 104857600, ms: 4000 } }
              after: { uses: test.noop, needs: [upload] }
            """)
        return try TmuxSession("env \(environment) TERM=xterm-256color \(TestPaths.orchestrate.path) run \(file) "
            + "\(h.baseArguments.joined(separator: " ")) --plugin-path \(pluginDir.path); echo EXIT=$?; sleep 60", columns: columns)
    }

    func screen(_ session: TmuxSession, escapes: Bool = false, history: Bool = false) -> String {
        session.screen(escapes: escapes, history: history)
    }

    func barLine(_ text: String) -> String? {
        text.split(separator: "\n").map(String.init).first { $0.hasPrefix("upload") && $0.contains("[") && $0.contains("ETA") }
    }

    /// The bar with an ETA once it shows other figures than `first`, within 5 s. Not a fixed
    /// second later: on a loaded machine a second can pass without a progress report, and the
    /// ETA slot stays blank while no rate is measured.
    func redrawn(_ session: TmuxSession, after first: String) -> String? {
        var later: String?
        _ = h.waitFor(5) {
            later = barLine(screen(session)).flatMap { $0 != first ? $0 : nil }
            return later != nil
        }
        return later
    }

    @Test func progressBarsRedrawInPlaceWithRateAndETA() throws {
        let session = try startInTmux()
        defer { session.close() }
        #expect(h.waitFor(15) { barLine(screen(session)) != nil })
        let first = try #require(barLine(screen(session)))
        #expect(first.contains("%") && first.contains("MiB/s") && first.contains("/ 100.0 MiB"))
        let later = try #require(redrawn(session, after: first), "the bar was not redrawn with new figures: \(screen(session))")
        #expect(later.contains("%") && later.contains("MiB/s"), "\(later)")
        // Redrawn in place: one bar on the screen, however many times it was drawn.
        #expect(screen(session).split(separator: "\n").filter { $0.contains("ETA") }.count == 1)
        // Colour on a TTY without NO_COLOR.
        #expect(screen(session, escapes: true).contains("\u{1B}["))

        #expect(h.waitFor(20) { screen(session).contains("EXIT=0") })
        let final = screen(session, history: true)
        #expect(barLine(final) == nil, "the bar is erased once the step is done")
        #expect(final.contains("upload") && final.contains("succeeded"))
        #expect(final.contains("run ") && final.contains("succeeded in"))
    }

    @Test func noColorIsHonoured() throws {
        let session = try startInTmux(environment: "NO_COLOR=1")
        defer { session.close() }
        #expect(h.waitFor(15) { barLine(screen(session)) != nil })
        #expect(!screen(session, escapes: true).contains("\u{1B}[3"), "no colour codes with NO_COLOR")
        #expect(h.waitFor(20) { screen(session).contains("EXIT=0") })
    }

    /// On a terminal of 80 columns, and of 64, the bar keeps the rate and the ETA (the figures
    /// that do not fit go first: the total) and its width while the figures change; no line is
    /// wider than the terminal.
    @Test(arguments: [80, 64])
    func theBarKeepsItsWidthAndTheETAOnANarrowTerminal(columns: Int) throws {
        let session = try startInTmux(columns: columns)
        defer { session.close() }
        #expect(h.waitFor(15) { barLine(screen(session)) != nil }, "no bar with an ETA at \(columns) columns: \(screen(session))")
        let first = try #require(barLine(screen(session)))
        #expect(first.contains("MiB/s") && first.count < columns, "\(first)")
        let later = try #require(redrawn(session, after: first), "the bar was not redrawn with its ETA: \(screen(session))")
        #expect(later.firstIndex(of: "]").map { later.distance(from: later.startIndex, to: $0) }
                    == first.firstIndex(of: "]").map { first.distance(from: first.startIndex, to: $0) },
                "the bar keeps its width:\n\(first)\n\(later)")
        #expect(h.waitFor(20) { screen(session).contains("EXIT=0") })
    }
}
