// Every file in BadWorkflows/ must fail to load with exactly the diagnostics its
// `# expect: LINE:COL: <substring of message>` comment lines announce — no fewer, no more.
import Foundation
import OrchestrateModel
import Testing

struct ExpectedDiagnostic: CustomStringConvertible {
    let line: Int
    let column: Int
    let substring: String
    var description: String { "\(line):\(column): \(substring)" }
}

enum BadWorkflowCorpus {
    static var directory: URL {
        Bundle.module.url(forResource: "BadWorkflows", withExtension: nil)!
    }

    static var files: [String] {
        let names = (try? FileManager.default.contentsOfDirectory(atPath: directory.path)) ?? []
        return names.filter { $0.hasSuffix(".yaml") }.sorted()
    }

    static func expectations(in text: String) -> [ExpectedDiagnostic] {
        text.split(separator: "\n", omittingEmptySubsequences: false).compactMap { line in
            guard line.hasPrefix("# expect: ") else { return nil }
            let rest = line.dropFirst("# expect: ".count)
            let parts = rest.split(separator: ":", maxSplits: 2)
            guard parts.count == 3, let l = Int(parts[0]), let c = Int(parts[1]) else { return nil }
            return ExpectedDiagnostic(line: l, column: c, substring: parts[2].trimmingCharacters(in: .whitespaces))
        }
    }
}

@Suite("Bad workflow corpus")
struct BadWorkflowCorpusTests {
    @Test("the corpus is large enough and every file announces its errors")
    func corpusIsComplete() throws {
        let files = BadWorkflowCorpus.files
        #expect(files.count >= 30)
        for name in files {
            let text = try String(contentsOf: BadWorkflowCorpus.directory.appendingPathComponent(name), encoding: .utf8)
            #expect(text.hasPrefix("# expect: "), "\(name) must start with an expect line")
            #expect(!BadWorkflowCorpus.expectations(in: text).isEmpty, "\(name) has no parsable expectation")
        }
    }

    @Test("reports exactly the expected diagnostics", arguments: BadWorkflowCorpus.files)
    func reportsExpectedDiagnostics(_ name: String) throws {
        let path = BadWorkflowCorpus.directory.appendingPathComponent(name).path
        let text = try String(contentsOfFile: path, encoding: .utf8)
        let expected = BadWorkflowCorpus.expectations(in: text)
        let errors: WorkflowErrors
        do {
            _ = try WorkflowLoader.load(path: path, catalog: TestCatalog())
            Issue.record("\(name) loaded without errors; expected \(expected)")
            return
        } catch {
            errors = error
        }
        let actual = errors.diagnostics
        let report = "actual:\n" + errors.description
        for e in expected {
            let match = actual.contains {
                $0.location.line == e.line && $0.location.column == e.column && $0.message.contains(e.substring)
            }
            #expect(match, "\(name): missing \(e)\n\(report)")
        }
        #expect(actual.count == expected.count, "\(name): expected \(expected.count) diagnostics\n\(report)")
        for d in actual {
            #expect(d.location.file == path)
            #expect(d.description == "\(path):\(d.location.line):\(d.location.column): error: \(d.message)")
        }
        // Sorted by position, one per line.
        #expect(actual.map(\.location) == actual.map(\.location).sorted())
        #expect(errors.description.split(separator: "\n").count >= actual.count)
    }
}
