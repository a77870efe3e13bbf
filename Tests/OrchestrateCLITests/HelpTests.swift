import Foundation
import OrchestrateTestSupport
import Testing

/// The help that teaches: every command, found by walking `--help` from the root (so a command
/// added later is checked too), shows examples; `--version` answers; the root groups its
/// subcommands; `--isolation` lists its values and refuses others by name.
@Suite struct HelpTests {
    /// The subcommand names a help text lists: the first word of each entry in its
    /// "SUBCOMMANDS:" and "<GROUP> SUBCOMMANDS:" sections (entries are indented two spaces;
    /// wrapped abstracts more).
    static func subcommands(in help: String) -> [String] {
        var names: [String] = [], inSubcommands = false
        // A blank line ends a section: the text after the last one ("  See 'orchestrate help
        // <subcommand>'…") is indented like an entry but is not one.
        for line in help.split(separator: "\n", omittingEmptySubsequences: false) {
            if line.isEmpty || !line.hasPrefix(" ") {
                inSubcommands = line.hasSuffix("SUBCOMMANDS:")
            } else if inSubcommands, !line.hasPrefix("   "), let name = line.split(separator: " ").first,
                      name.allSatisfy({ $0.isLowercase || $0 == "-" })
            {
                names.append(String(name))
            }
        }
        return names
    }

    @Test func everyCommandsHelpHasExamples() throws {
        var queue: [[String]] = [[]], seen: [String] = []
        while !queue.isEmpty {
            let path = queue.removeFirst()
            let result = try ChildProcess.orchestrate(path + ["--help"])
            let name = (["orchestrate"] + path).joined(separator: " ")
            #expect(result.status == 0, "\(name) --help: \(result.stderr)")
            #expect(result.stdout.contains("Examples:\n  orchestrate "), "\(name) --help has no Examples: block")
            seen.append(name)
            for sub in Self.subcommands(in: result.stdout) where sub != "help" { queue.append(path + [sub]) }
        }
        // The walk really went through the tree: every command of the groups and both `plugins` subcommands.
        #expect(seen.count >= 22, "\(seen)")
        #expect(seen.contains("orchestrate plugins inspect") && seen.contains("orchestrate add-path"), "\(seen)")
    }

    @Test func theRootGroupsItsSubcommands() throws {
        let help = try ChildProcess.orchestrate(["--help"]).stdout
        for group in ["RUN SUBCOMMANDS:", "QUEUE SUBCOMMANDS:", "INSPECTION SUBCOMMANDS:", "PLUGIN SUBCOMMANDS:"] {
            #expect(help.contains("\n" + group + "\n"), "no \(group) in:\n\(help)")
        }
        let running = try #require(help.range(of: "RUN SUBCOMMANDS:")), queue = try #require(help.range(of: "QUEUE SUBCOMMANDS:"))
        #expect(help[running.upperBound..<queue.lowerBound].contains("  resume "))
        #expect(help[queue.upperBound...].contains("  serve "))
    }

    @Test func versionPrintsTheVersion() throws {
        let result = try ChildProcess.orchestrate(["--version"])
        #expect(result.status == 0)
        let line = result.stdout.trimmingCharacters(in: .whitespacesAndNewlines)
        #expect(line.range(of: #"^\d+\.\d+\.\d+ \(plugin ABI 1\.\d+\)$"#, options: .regularExpression) != nil, "\(line)")
    }

    @Test func isolationListsItsValuesAndRefusesOthersByName() throws {
        let help = try ChildProcess.orchestrate(["run", "--help"]).stdout
        #expect(help.contains("in-process") && help.contains("values: in-process, process"), "\(help)")
        let h = Harness()
        let file = h.workflow("version: 1\nname: x\nsteps:\n  a: { uses: test.noop }\n")
        let bad = try h.orchestrate(["run", file, "--isolation", "thread"])
        #expect(bad.status == 2)
        #expect(bad.stderr.contains("'thread'") && bad.stderr.contains("--isolation") && bad.stderr.contains("in-process"), "\(bad.stderr)")
        let badEnv = try h.orchestrate(["run", file], environment: ["ORCHESTRATE_ISOLATION": "thread"])
        #expect(badEnv.status == 2)
        #expect(badEnv.stderr.contains("ORCHESTRATE_ISOLATION takes in-process or process, not 'thread'"), "\(badEnv.stderr)")
    }

    @Test func aUsageErrorSaysErrorOnce() throws {
        let result = try ChildProcess.orchestrate(["list", "surplus"])
        #expect(result.status == 2)
        let first = result.stderr.split(separator: "\n").first.map(String.init) ?? ""
        #expect(first == "error: Unexpected argument 'surplus'", "\(result.stderr)")
    }

    @Test func validateCountsOneStepInTheSingular() throws {
        let h = Harness()
        let one = h.workflow("version: 1\nname: one\nsteps:\n  a: { uses: test.noop }\n", name: "one.yaml")
        let two = h.workflow("version: 1\nname: two\nsteps:\n  a: { uses: test.noop }\n  b: { uses: test.noop }\n", name: "two.yaml")
        let result = try h.orchestrate(["validate", one, two])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(result.stdout == "\(one): ok (1 step)\n\(two): ok (2 steps)\n", "\(result.stdout)")
    }
}
