// `on.watch` → `WatchTrigger` (the `on:` mapping itself: WorkflowDecoder+Triggers.swift).
import OrchestrateJSON

/// Where the parts of `on.watch` were, for the cross-checks in `WorkflowValidator+Watch`.
struct WatchSyntax {
    /// The input names given in `inputs`, with their key locations.
    let inputKeys: [(String, SourceLocation)]
    /// The `inputs` key (where missing required inputs are reported), else the `watch` key.
    let inputsAnchor: SourceLocation
    let feedLocation: SourceLocation?
}

extension WorkflowDecoder {
    static let watchFields = ["path", "recursive", "include", "exclude", "settle", "inputs", "feed", "destination", "after"]

    /// `on.watch`; nil when it is too broken to use (the errors are in the bag).
    mutating func decodeWatch(_ pair: YAMLPair) -> (WatchTrigger, WatchSyntax)? {
        guard let f = reader.fields(of: pair.value, place: "in on.watch", allowed: Self.watchFields, what: "'on.watch'") else {
            return nil
        }
        var path = ""
        if let p = f["path"], let text = reader.string(p) {
            if text.isEmpty { reader.bag.error("'path' must name the folder to watch", at: p.value.location) }
            path = text
        } else if f["path"] == nil {
            reader.bag.error("on.watch is missing required field 'path' (the folder to watch)", at: pair.key.location)
        }
        let recursive = f["recursive"].flatMap { reader.bool($0) } ?? false
        let include = f["include"].map { globs($0) } ?? []
        let exclude = f["exclude"].map { globs($0) } ?? []
        let settle = f["settle"].flatMap { reader.duration($0, positive: true) } ?? WatchTrigger.defaultSettle

        let inputs: Template = f["inputs"].map { inputsTemplate($0) } ?? .literal(.object([:]))
        let inputKeys = f["inputs"]?.value.pairs?.map { ($0.name, $0.key.location) } ?? []
        var work = WatchTrigger.Work.runs(inputs: inputs)
        if let p = f["feed"] {
            let step = reader.string(p) ?? ""
            var destination = Template.expression(Self.fileRelative(at: p.value.location))
            if let d = f["destination"] {
                destination = reader.template(d.value)
                if case .literal(let v) = destination, v.stringValue == nil {
                    reader.bag.error("'destination' must be a string, not \(d.value.kindDescription)", at: d.value.location)
                }
            }
            work = .feed(step: step, inputs: inputs, destination: destination)
        } else if let d = f["destination"] {
            reader.bag.error("'destination' only applies with 'feed' (the item's remote path); with one run per file, "
                             + "pass the file to an input instead", at: d.key.location)
        }
        let after = f["after"].flatMap { decodeAfter($0) } ?? .keep
        let trigger = WatchTrigger(path: path, recursive: recursive, include: include, exclude: exclude, settle: settle,
                                   work: work, after: after, location: pair.key.location)
        let syntax = WatchSyntax(inputKeys: inputKeys, inputsAnchor: f["inputs"]?.key.location ?? pair.key.location,
                                 feedLocation: f["feed"]?.value.location)
        return (trigger, syntax)
    }

    /// `include`/`exclude`: one glob or a list of them.
    private mutating func globs(_ pair: YAMLPair) -> [String] {
        let list = reader.stringList(pair, single: true, what: "a glob such as '*.mov' or a list of them") ?? []
        for (glob, location) in list where glob.isEmpty {
            reader.bag.error("an empty pattern in '\(pair.name)' matches nothing; remove it", at: location)
        }
        return list.map(\.0).filter { !$0.isEmpty }
    }

    private mutating func inputsTemplate(_ pair: YAMLPair) -> Template {
        guard pair.value.pairs != nil else {
            reader.bag.error("'inputs' must be a mapping from input name to value, not \(pair.value.kindDescription)",
                             at: pair.value.location)
            return .literal(.object([:]))
        }
        return reader.template(pair.value)
    }

    /// `after: keep | delete | move-to DIR`.
    private mutating func decodeAfter(_ pair: YAMLPair) -> WatchTrigger.After? {
        guard let text = reader.string(pair) else { return nil }
        let words = text.split(separator: " ", maxSplits: 1).map { String($0).trimmingWhitespace }
        switch words.first {
        case "keep" where words.count == 1: return .keep
        case "delete" where words.count == 1: return .delete
        case "move-to" where words.count == 2 && !words[1].isEmpty: return .moveTo(words[1])
        case "move-to":
            reader.bag.error("'after: move-to' needs a folder, as in 'move-to /media/sent'", at: pair.value.location)
            return nil
        default:
            reader.bag.error("'after' is 'keep', 'delete' or 'move-to DIR', not '\(text)'", at: pair.value.location)
            return nil
        }
    }

    /// `${{ file.relative }}`, the default destination of a fed item.
    private static func fileRelative(at location: SourceLocation) -> Expression {
        let base = ExprNode(kind: .context(.file), location: location)
        return Expression(source: "file.relative", location: location,
                          root: ExprNode(kind: .member(base, "relative"), location: location))
    }
}
