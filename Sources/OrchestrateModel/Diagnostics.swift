// Where things are in a workflow file, and the errors reported against it.
//
// Every problem found while loading a workflow becomes a `Diagnostic` pinned to the exact line
// and column of the offending YAML node (or character inside an expression). Loading collects
// all of them and throws one `WorkflowErrors`, so a user fixes a file in one pass:
//
//     do { _ = try WorkflowLoader.load(path: "w.yaml", catalog: nil) }
//     catch { print(error) }   // w.yaml:7:5: error: unknown field 'retires' in step 'upload'; did you mean 'retry'?

/// A position in a workflow file. Lines and columns are 1-based; columns count Unicode scalars
/// (as libyaml does), so a tab counts as one column.
public struct SourceLocation: Sendable, Hashable, Comparable, CustomStringConvertible {
    public let file: String
    public let line: Int
    public let column: Int

    public init(file: String, line: Int, column: Int) {
        self.file = file
        self.line = line
        self.column = column
    }

    /// `FILE:LINE:COL`
    public var description: String { "\(file):\(line):\(column)" }

    public static func < (a: SourceLocation, b: SourceLocation) -> Bool {
        (a.file, a.line, a.column) < (b.file, b.line, b.column)
    }

    /// The same line, `columns` further right.
    func advanced(by columns: Int) -> SourceLocation {
        SourceLocation(file: file, line: line, column: column + columns)
    }
}

/// One problem in a workflow file, printed compiler-style: `FILE:LINE:COL: error: MESSAGE`.
public struct Diagnostic: Error, Sendable, Hashable, CustomStringConvertible {
    public let location: SourceLocation
    public let message: String

    public init(location: SourceLocation, message: String) {
        self.location = location
        self.message = message
    }

    public var description: String { "\(location): error: \(message)" }
}

/// Every problem found in one workflow file, sorted by line then column.
/// `description` prints one diagnostic per line, ready for stderr.
public struct WorkflowErrors: Error, Sendable, CustomStringConvertible {
    public let diagnostics: [Diagnostic]

    public init(diagnostics: [Diagnostic]) {
        // Stable sort: two errors at the same spot keep the order they were found in.
        self.diagnostics = diagnostics.enumerated()
            .sorted { ($0.element.location, $0.offset) < ($1.element.location, $1.offset) }
            .map(\.element)
    }

    public var description: String { diagnostics.map(\.description).joined(separator: "\n") }
}

/// Collects diagnostics while a file is decoded and validated; never stops at the first one.
struct DiagnosticBag {
    private(set) var diagnostics: [Diagnostic] = []
    private var seen: Set<Diagnostic> = []

    var isEmpty: Bool { diagnostics.isEmpty }

    mutating func error(_ message: String, at location: SourceLocation) {
        let d = Diagnostic(location: location, message: message)
        // The same node can be reached twice (a YAML alias); report it once.
        if seen.insert(d).inserted { diagnostics.append(d) }
    }

    mutating func append(_ d: Diagnostic) { error(d.message, at: d.location) }
}
