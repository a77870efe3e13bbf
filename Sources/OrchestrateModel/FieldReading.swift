// Small typed readers over YAML nodes, shared by the workflow decoder. Each reports a precise
// diagnostic (at the offending key or value) and returns nil, so decoding always goes on.
import OrchestrateJSON

struct FieldReader {
    let source: SourceText
    var bag = DiagnosticBag()

    /// The known fields of a mapping, by name. Reports: not a mapping, duplicate keys, and
    /// unknown fields (with a suggestion) — `place` completes "unknown field 'x' …", e.g.
    /// "in step 'upload'". `place` and `what` are only built when there is something to report
    /// (a long workflow reads a mapping per step).
    mutating func fields(of node: YAMLNode, place: @autoclosure () -> String, allowed: [String],
                         what: @autoclosure () -> String) -> Fields?
    {
        guard node.pairs != nil else {
            bag.error("\(what()) must be a mapping, not \(node.kindDescription)", at: node.location)
            return nil
        }
        var fields = Fields()
        for (name, pair) in TemplateBuilder.uniquePairs(node, bag: &bag) {
            guard allowed.contains(name) else {
                bag.error("unknown field '\(name)' \(place())\(didYouMean(name, allowed))", at: pair.key.location)
                continue
            }
            fields.names.append(name)
            fields.pairs.append(pair)
        }
        return fields
    }

    /// The fields of one mapping, first occurrence of each name. A handful at most (a step has
    /// 13 possible fields), so looked up by scanning the names rather than hashed; only the pair
    /// found is copied.
    struct Fields {
        fileprivate(set) var names: [String] = []
        fileprivate(set) var pairs: [YAMLPair] = []

        subscript(name: String) -> YAMLPair? {
            names.firstIndex(of: name).map { pairs[$0] }
        }
    }

    /// A string scalar. Numbers and booleans are refused (`uses: 5`), except when `lenient`
    /// (free text such as `name:` or `description:`, where `name: 2024` means the text "2024").
    mutating func string(_ pair: YAMLPair, lenient: Bool = false) -> String? {
        let node = pair.value
        if let s = node.stringValue { return s }
        if lenient, let scalar = node.scalar, !scalar.jsonValue.isNull { return scalar.text }
        bag.error("'\(pair.name)' must be a string, not \(node.kindDescription)", at: node.location)
        return nil
    }

    mutating func bool(_ pair: YAMLPair) -> Bool? {
        if case .bool(let b) = pair.value.scalar?.jsonValue { return b }
        bag.error("'\(pair.name)' must be true or false, not \(pair.value.kindDescription)", at: pair.value.location)
        return nil
    }

    mutating func integer(_ pair: YAMLPair, minimum: Int) -> Int? {
        guard let value = pair.value.scalar?.jsonValue, case .int(let i) = value else {
            bag.error("'\(pair.name)' must be an integer, not \(pair.value.kindDescription)", at: pair.value.location)
            return nil
        }
        guard i >= minimum, i <= Int64(Int32.max) else {
            bag.error("'\(pair.name)' must be at least \(minimum), not \(i)", at: pair.value.location)
            return nil
        }
        return Int(i)
    }

    mutating func number(_ pair: YAMLPair, minimum: Double) -> Double? {
        guard let d = pair.value.scalar?.jsonValue.doubleValue, d.isFinite else {
            bag.error("'\(pair.name)' must be a number, not \(pair.value.kindDescription)", at: pair.value.location)
            return nil
        }
        guard d >= minimum else {
            bag.error("'\(pair.name)' must be at least \(minimum.formatted), not \(d.formatted)", at: pair.value.location)
            return nil
        }
        return d
    }

    /// A duration such as `30s`; `positive` refuses `0s`.
    mutating func duration(_ pair: YAMLPair, positive: Bool) -> Duration? {
        let node = pair.value
        guard let scalar = node.scalar, !scalar.jsonValue.isNull else {
            bag.error("'\(pair.name)' must be a duration such as 30s or 10m, not \(node.kindDescription)", at: node.location)
            return nil
        }
        guard let d = parseDuration(scalar.text) else {
            let hint = scalar.jsonValue.doubleValue != nil ? "; add a unit, e.g. '\(scalar.text)s'" : ""
            bag.error("invalid duration '\(scalar.text)' for '\(pair.name)': write a number and a unit, "
                      + "as in 500ms, 30s, 10m, 6h or 1h30m\(hint)", at: node.location)
            return nil
        }
        if positive, d <= .zero {
            bag.error("'\(pair.name)' must be longer than zero", at: node.location)
            return nil
        }
        return d
    }

    /// A list of strings; a single string is accepted as a list of one when `single` is true.
    /// Returns each string with its location.
    mutating func stringList(_ pair: YAMLPair, single: Bool, what: String) -> [(String, SourceLocation)]? {
        let node = pair.value
        if single, let s = node.stringValue { return [(s, node.location)] }
        guard let items = node.items else {
            bag.error("'\(pair.name)' must be \(what), not \(node.kindDescription)", at: node.location)
            return nil
        }
        var out: [(String, SourceLocation)] = []
        for item in items {
            guard let s = item.stringValue else {
                bag.error("each entry of '\(pair.name)' must be a string, not \(item.kindDescription)", at: item.location)
                continue
            }
            out.append((s, item.location))
        }
        return out
    }

    /// A value tree where strings may hold expressions.
    mutating func template(_ node: YAMLNode) -> Template {
        TemplateBuilder.build(node, source: source, bag: &bag)
    }

    /// Whether a name is a valid step, input or secret name: `[A-Za-z_][A-Za-z0-9_-]*`.
    static func isIdentifier(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, first == "_" || ("a"..."z").contains(first) || ("A"..."Z").contains(first)
        else { return false }
        return name.unicodeScalars.allSatisfy {
            $0 == "_" || $0 == "-" || ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
        }
    }
}

extension Double {
    /// "2" for 2.0, "2.5" for 2.5.
    var formatted: String { rounded() == self && abs(self) < 1e15 ? String(Int64(self)) : String(self) }
}
