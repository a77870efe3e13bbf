import Foundation
import OrchestrateJSON
import OrchestrateTestSupport
import Testing

/// The dashboard in a real browser: Debian's headless Chromium, driven by Selenium from a
/// virtualenv (scripts/python-venv.sh), against a real `serve`. tools/dashboard_browser.py does
/// the clicking (a run with a hostile label appears and is shown as text, its progress advances
/// without a reload, Pause and Resume and Cancel act on it, the filters filter; a file added to a
/// session shows its own advancing bar; a schedule is paused, resumed and paused); this test
/// checks the store agrees, and keeps a
/// screenshot of each view in .build/artifacts/dashboard/.
@Suite(.serialized) struct DashboardBrowserTests {
    @Test func theDashboardInABrowser() throws {
        for program in ["/usr/bin/chromium", "/usr/bin/chromedriver"] {
            #expect(FileManager.default.isExecutableFile(atPath: program), "\(program) is missing: run scripts/install-deps.sh")
        }
        let python = try PythonVenv.python()

        let serve = try APIServe()
        let printed = try String(contentsOfFile: serve.dir.file("serve.err").path, encoding: .utf8)
        let url = try #require(printed.split(separator: "\n").first { $0.hasPrefix("Dashboard: ") }?.dropFirst("Dashboard: ".count),
                               "serve printed no dashboard URL: \(printed)")
        // A schedule for the schedules view (daily at 03:00: it does not fire during the test).
        try serve.registerSchedule("nightly-upload", entries: [#"{ cron: "0 3 * * *", timezone: Europe/Berlin }"#])
        let artifacts = TestPaths.packageRoot.appendingPathComponent(".build/artifacts/dashboard")
        try? FileManager.default.removeItem(at: artifacts)
        try FileManager.default.createDirectory(at: artifacts, withIntermediateDirectories: true)

        let browser = try ChildProcess.run(python,
                                           [TestPaths.packageRoot.appendingPathComponent("tools/dashboard_browser.py").path,
                                            String(url), artifacts.path])
        print("dashboard screenshots: \(artifacts.path)")
        try #require(browser.status == 0, "the browser test failed:\n\(browser.stdout)\n\(browser.stderr)")
        let cancelled = try #require(browser.stdout.split(separator: "\n").first { $0.hasPrefix("CANCELLED ") }?.dropFirst("CANCELLED ".count))

        // The store says what the page said.
        let status = try JSONValue(parsing: try serve.orchestrate(["status", String(cancelled), "--json"]).stdout)
        #expect(status["status"]?.stringValue == "cancelled")
        #expect(status["labels"]?["title"]?.stringValue == "<script>alert(1)</script>")
        // The page paused the schedule last.
        let schedules = try serve.orchestrate(["schedules", "--json"]).stdout.split(separator: "\n").map { try JSONValue(parsing: String($0)) }
        #expect(schedules.map { $0["paused"]?.boolValue } == [true], "\(schedules)")
        for view in ["overview", "runs", "run", "run-phone", "run-files", "queues", "nodes", "schedules", "plugins"] {
            #expect(FileManager.default.fileExists(atPath: artifacts.appendingPathComponent("\(view).png").path), "no screenshot of \(view)")
        }
    }
}
