// The pages made from the code (schemas/workflow.schema.json, docs/reference/*.md) are what
// scripts/generate-references.sh makes from this build: a flag, a step input, a metric or an
// event type added without regenerating fails here, with the command to run.
import Foundation
import OrchestrateTestSupport
import Testing

@Suite("Generated reference pages")
struct ReferencePagesTests {
    static let pages = ["schemas/workflow.schema.json", "docs/reference/cli.md", "docs/reference/steps.md",
                        "docs/reference/metrics.md", "docs/reference/events.md"]

    @Test("every generated page is current")
    func pagesAreCurrent() throws {
        let out = TemporaryDirectory("references")
        var environment = ProcessInfo.processInfo.environment
        environment["ORCHESTRATE_BIN_DIR"] = TestPaths.productsDir.path
        environment["ORCHESTRATE_REFERENCES_NO_BUILD"] = "1"  // no SwiftPM build inside a test
        let script = TestPaths.packageRoot.appendingPathComponent("scripts/generate-references.sh")
        let made = try ChildProcess.run(URL(fileURLWithPath: "/bin/bash"), [script.path, out.path], environment: environment)
        try #require(made.status == 0, "scripts/generate-references.sh failed: \(made.stderr)")
        var pages = Self.pages
        if FileManager.default.isExecutableFile(atPath: TestPaths.productsDir.appendingPathComponent("generate-manual").path) {
            pages.append("docs/reference/orchestrate.1")
        } else {
            print("SKIPPED: docs/reference/orchestrate.1 not checked: build the tool with `swift build --product generate-manual`")
        }
        var stale: [String] = []
        for page in pages {
            let fresh = try String(contentsOf: out.file(page), encoding: .utf8)
            let committed = try? String(contentsOf: TestPaths.packageRoot.appendingPathComponent(page), encoding: .utf8)
            if fresh != committed { stale.append(page) }
        }
        #expect(stale.isEmpty, "stale: \(stale.joined(separator: ", ")); regenerate with `swift build && scripts/generate-references.sh` and commit them")
    }
}
