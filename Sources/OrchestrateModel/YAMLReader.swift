// Reading YAML text into the located tree (`YAMLNode`), straight from libyaml's events.
//
// libyaml (Yams' CYaml module) scans and parses; this file composes its events into our tree.
// Yams' own composer built a node tree of class-backed tags first and refused duplicate keys
// (so the file was masked and composed again per duplicate); we keep every pair in file order,
// duplicates included, and the decoder reports each duplicate where it is. That tree, copied
// into ours, cost more than libyaml itself: a third of loading a long workflow.
import CYaml
import OrchestrateJSON

/// The result of reading a YAML file: its root (nil for an empty document) or the syntax error.
enum YAMLReader {
    /// Composes `text` into a located tree, or returns the diagnostic that stopped it.
    static func read(_ text: String, source: SourceText) -> Result<YAMLNode?, Diagnostic> {
        var text = text
        return text.withUTF8 { bytes in
            var composer = EventComposer(source: source)
            return composer.compose(bytes)
        }
    }
}

/// One pass over libyaml's events with an explicit stack of open collections, so a deeply nested
/// document cannot exhaust the thread's stack.
///
/// An alias shares its anchor's node (no copy), but whatever reads the tree walks it expanded:
/// a few hundred bytes of nested aliases ("billion laughs") expand to billions of nodes. So every
/// node carries its expanded size (1 per node plus the bytes of its scalars, aliases counted
/// expanded), and the aliases of one file may add at most `aliasExpansionLimit` of it.
private struct EventComposer {
    let source: SourceText
    /// Collections begun and not yet ended, innermost last.
    private var open: [OpenCollection] = []
    /// Anchored nodes by name, with their expanded size; a later anchor of the same name shadows
    /// an earlier one.
    private var anchors: [String: (node: YAMLNode, size: Int)] = [:]
    private var root: YAMLNode?
    /// The expanded size the aliases added so far.
    private var aliasExpansion = 0
    /// About a megabyte of YAML written out: far more than aliases add to any real workflow,
    /// and read in well under a second.
    static let aliasExpansionLimit = 1_000_000

    init(source: SourceText) { self.source = source }

    private struct OpenCollection {
        let location: SourceLocation
        let anchor: String?
        /// nil for a sequence.
        var pairs: [YAMLPair]?
        var items: [YAMLNode] = []
        /// A mapping's key whose value has not been read yet.
        var key: YAMLNode?
        /// The expanded size of the collection so far (itself and its children).
        var size = 1
    }

    /// The whole stream: one document at most, as Yams' `compose` allowed.
    mutating func compose(_ bytes: UnsafeBufferPointer<UInt8>) -> Result<YAMLNode?, Diagnostic> {
        var parser = yaml_parser_t()
        guard yaml_parser_initialize(&parser) == 1 else {
            return .failure(Diagnostic(location: source.location(line: 1, column: 1), message: "invalid YAML: Memory error"))
        }
        defer { yaml_parser_delete(&parser) }
        yaml_parser_set_encoding(&parser, YAML_UTF8_ENCODING)
        yaml_parser_set_input_string(&parser, bytes.baseAddress, bytes.count)

        var event = yaml_event_t()
        var documents = 0
        while true {
            guard yaml_parser_parse(&parser, &event) == 1 else {
                return .failure(SyntaxError(parser, bytes: bytes).diagnostic(source: source))
            }
            defer { yaml_event_delete(&event) }
            switch event.type {
            case YAML_STREAM_END_EVENT:
                return .success(root)
            case YAML_DOCUMENT_START_EVENT:
                documents += 1
                if documents > 1 {
                    let error = SyntaxError(kind: .composer, problem: "but found another document",
                                            mark: mark(event.start_mark),
                                            context: ("expected a single document in the stream", (line: 1, column: 1)))
                    return .failure(error.diagnostic(source: source))
                }
            case YAML_SCALAR_EVENT:
                let node = scalar(event)
                let size = 1 + event.data.scalar.length
                if let name = string(event.data.scalar.anchor) { anchors[name] = (node, size) }
                attach(node, size: size)
            case YAML_ALIAS_EVENT:
                let name = string(event.data.alias.anchor) ?? ""
                guard let (node, size) = anchors[name] else {
                    let error = SyntaxError(kind: .composer, problem: "found undefined alias",
                                            mark: mark(event.start_mark), context: nil)
                    return .failure(error.diagnostic(source: source))
                }
                aliasExpansion += size
                if aliasExpansion > Self.aliasExpansionLimit {
                    let message = "the aliases of this file expand it by more than \(Self.aliasExpansionLimit / 1_000_000) million "
                        + "nodes and characters (alias '\(name)' here): nested aliases multiply (a YAML alias bomb?); "
                        + "write the repeated parts out, or alias fewer of them"
                    return .failure(Diagnostic(location: location(event.start_mark), message: message))
                }
                attach(node, size: size)
            case YAML_SEQUENCE_START_EVENT:
                open.append(OpenCollection(location: location(event.start_mark),
                                           anchor: string(event.data.sequence_start.anchor), pairs: nil))
            case YAML_MAPPING_START_EVENT:
                open.append(OpenCollection(location: location(event.start_mark),
                                           anchor: string(event.data.mapping_start.anchor), pairs: []))
            case YAML_SEQUENCE_END_EVENT, YAML_MAPPING_END_EVENT:
                let done = open.removeLast()
                let node: YAMLNode
                if let pairs = done.pairs {
                    node = YAMLNode(kind: .mapping(pairs), location: done.location)
                } else {
                    node = YAMLNode(kind: .sequence(done.items), location: done.location)
                }
                if let anchor = done.anchor { anchors[anchor] = (node, done.size) }
                attach(node, size: done.size)
            default:
                break  // stream start, document end
            }
        }
    }

    /// Puts a finished node where it belongs: the root, a sequence's next item, or a mapping's
    /// next key or value.
    private mutating func attach(_ node: YAMLNode, size: Int) {
        guard !open.isEmpty else {
            root = node
            return
        }
        let top = open.count - 1
        open[top].size += size
        if open[top].pairs == nil {
            open[top].items.append(node)
        } else if let key = open[top].key {
            open[top].pairs!.append(YAMLPair(key: key, value: node))
            open[top].key = nil
        } else {
            open[top].key = node
        }
    }

    private static let stringTag = "tag:yaml.org,2002:str"

    private func scalar(_ event: yaml_event_t) -> YAMLNode {
        let data = event.data.scalar
        let text = String(decoding: UnsafeBufferPointer(start: data.value, count: data.length), as: UTF8.self)
        let style: YAMLScalar.Style
        switch data.style {
        case YAML_SINGLE_QUOTED_SCALAR_STYLE: style = .singleQuoted
        case YAML_DOUBLE_QUOTED_SCALAR_STYLE: style = .doubleQuoted
        case YAML_LITERAL_SCALAR_STYLE: style = .literal
        case YAML_FOLDED_SCALAR_STYLE: style = .folded
        default: style = .plain
        }
        // A quoted scalar without a tag is a string; "!" (non-specific) counts as no tag.
        var tag: String?
        if data.quoted_implicit == 1 {
            tag = Self.stringTag
        } else if let written = string(data.tag), !written.isEmpty, written != "!" {
            tag = written
        }
        return YAMLNode(kind: .scalar(YAMLScalar(text: text, style: style, tag: tag)), location: location(event.start_mark))
    }

    private func location(_ mark: yaml_mark_t) -> SourceLocation {
        source.location(line: mark.line + 1, column: mark.column + 1)
    }

    private func mark(_ mark: yaml_mark_t) -> (line: Int, column: Int) { (mark.line + 1, mark.column + 1) }

    private func string(_ pointer: UnsafeMutablePointer<yaml_char_t>?) -> String? {
        pointer.map { String(cString: $0) }
    }
}

/// A libyaml error (or one of the composer's own), as libyaml words it, turned into a diagnostic.
private struct SyntaxError {
    enum Kind { case reader, scanner, parser, composer, memory }
    let kind: Kind
    let problem: String
    /// 1-based; for a reader error, the position of the offending byte.
    let mark: (line: Int, column: Int)
    let context: (text: String, mark: (line: Int, column: Int))?

    init(kind: Kind, problem: String, mark: (line: Int, column: Int), context: (String, (line: Int, column: Int))?) {
        self.kind = kind
        self.problem = problem
        self.mark = mark
        self.context = context
    }

    init(_ parser: yaml_parser_t, bytes: UnsafeBufferPointer<UInt8>) {
        problem = parser.problem.map { String(cString: $0) } ?? "unknown problem"
        context = parser.context.map { (String(cString: $0), (parser.context_mark.line + 1, parser.context_mark.column + 1)) }
        switch parser.error {
        case YAML_READER_ERROR:
            kind = .reader
            mark = Self.position(ofByte: parser.problem_offset, in: bytes)
        case YAML_SCANNER_ERROR: kind = .scanner; mark = (parser.problem_mark.line + 1, parser.problem_mark.column + 1)
        case YAML_PARSER_ERROR: kind = .parser; mark = (parser.problem_mark.line + 1, parser.problem_mark.column + 1)
        case YAML_COMPOSER_ERROR: kind = .composer; mark = (parser.problem_mark.line + 1, parser.problem_mark.column + 1)
        default: kind = .memory; mark = (1, 1)
        }
    }

    /// Line and column (in Unicode scalars) of a byte offset: the reader reports no mark.
    private static func position(ofByte offset: Int, in bytes: UnsafeBufferPointer<UInt8>) -> (line: Int, column: Int) {
        var line = 1, column = 1
        for byte in bytes.prefix(offset) {
            if byte == UInt8(ascii: "\n") {
                line += 1
                column = 1
            } else if byte & 0xC0 != 0x80 {  // not a UTF-8 continuation byte
                column += 1
            }
        }
        return (line, column)
    }

    func diagnostic(source: SourceText) -> Diagnostic {
        let location = source.location(line: mark.line, column: mark.column)
        switch kind {
        case .memory:
            return Diagnostic(location: source.location(line: 1, column: 1), message: "invalid YAML: Memory error")
        case .reader:
            return Diagnostic(location: location, message: "invalid text: \(problem)")
        case .scanner, .parser, .composer:
            if let row = source.line(mark.line),
               row.prefix(max(mark.column, 1)).contains("\t"),
               row.prefix(max(mark.column - 1, 0)).allSatisfy({ $0 == " " || $0 == "\t" })
            {
                return Diagnostic(location: location, message: "tab character in indentation; YAML indents with spaces only")
            }
            var message = "invalid YAML: \(problem)"
            if let context { message += " (\(context.text) at \(context.mark.line):\(context.mark.column))" }
            return Diagnostic(location: location, message: message)
        }
    }
}
