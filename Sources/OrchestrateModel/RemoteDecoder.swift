// `remotes:` (in a workflow or the user's remotes file) → `Remote` values, every error reported
// where it is.
import OrchestrateJSON

struct RemoteDecoder {
    var reader: FieldReader

    /// The fields of a secret reference, `{ env: VAR }` or `{ file: PATH }`.
    static let referenceFields = ["env", "file"]

    mutating func decode(_ node: YAMLNode) -> [Remote] {
        if node.scalar?.jsonValue.isNull == true { return [] }
        guard node.pairs != nil else {
            reader.bag.error("'remotes' must be a mapping from remote name to { type, ... }, not \(node.kindDescription)",
                             at: node.location)
            return []
        }
        var out: [Remote] = []
        for (name, pair) in TemplateBuilder.uniquePairs(node, noun: "remote", bag: &reader.bag) {
            if !FieldReader.isIdentifier(name) {
                reader.bag.error("invalid remote name '\(name)': use letters, digits, '_' and '-', starting with a letter or '_'",
                                 at: pair.key.location)
                continue
            }
            if let remote = decodeRemote(name: name, pair) { out.append(remote) }
        }
        return out
    }

    private mutating func decodeRemote(name: String, _ pair: YAMLPair) -> Remote? {
        guard pair.value.pairs != nil else {
            reader.bag.error("remote '\(name)' must be a mapping of { type, ... }, not \(pair.value.kindDescription)",
                             at: pair.value.location)
            return nil
        }
        let pairs = TemplateBuilder.uniquePairs(pair.value, bag: &reader.bag)
        guard let typePair = pairs.first(where: { $0.0 == "type" })?.1 else {
            reader.bag.error("remote '\(name)' is missing required field 'type' (\(quotedList(RemoteType.allCases.map(\.rawValue))))",
                             at: pair.key.location)
            return nil
        }
        guard let typeName = reader.string(typePair) else { return nil }
        guard let type = RemoteType(rawValue: typeName) else {
            let names = RemoteType.allCases.map(\.rawValue)
            reader.bag.error("unknown remote type '\(typeName)' (types are \(quotedList(names)))\(didYouMean(typeName, names))",
                             at: typePair.value.location)
            return nil
        }
        var fields: [RemoteField] = []
        for (field, fieldPair) in pairs where field != "type" {
            guard type.fields.contains(field) else {
                reader.bag.error("unknown field '\(field)' in \(type.rawValue) remote '\(name)' (a remote holds the connection: "
                    + "\(quotedList(type.fields, conjunction: "and")))\(didYouMean(field, type.fields))",
                    at: fieldPair.key.location)
                continue
            }
            if let value = decodeValue(field, fieldPair, remote: name, secret: type.secretFields.contains(field)) {
                fields.append(RemoteField(name: field, value: value, location: fieldPair.value.location, node: fieldPair.value))
            }
        }
        return Remote(name: name, type: type, fields: fields, location: pair.key.location)
    }

    private mutating func decodeValue(_ field: String, _ pair: YAMLPair, remote: String, secret: Bool) -> RemoteValue? {
        let node = pair.value
        if node.pairs != nil, field != "headers" {
            guard let f = reader.fields(of: node, place: "in '\(field)' of remote '\(remote)'", allowed: Self.referenceFields,
                                        what: "'\(field)'")
            else { return nil }
            switch (f["env"], f["file"]) {
            case (let env?, nil):
                guard let name = reader.string(env) else { return nil }
                guard Self.isEnvironmentName(name) else {
                    reader.bag.error("invalid environment variable name '\(name)'", at: env.value.location)
                    return nil
                }
                return .environment(name)
            case (nil, let file?):
                guard let path = reader.string(file) else { return nil }
                guard path.hasPrefix("/") || path.hasPrefix("~/") else {
                    reader.bag.error("'file' must be an absolute path (or start with ~/), not '\(path)': "
                        + "a relative one would depend on the directory orchestrate is started from", at: file.value.location)
                    return nil
                }
                return .file(path)
            default:
                reader.bag.error("'\(field)' of remote '\(remote)' takes one of { env: VARIABLE } or { file: PATH }",
                                 at: node.location)
                return nil
            }
        }
        if secret {
            reader.bag.error("'\(field)' of remote '\(remote)' is a secret: give it as { env: VARIABLE } or { file: PATH }, "
                + "never written in the remote", at: node.location)
            return nil
        }
        if let text = Self.firstExpression(in: node) {
            reader.bag.error("remote values are taken literally; '\(text)' holds '${{': "
                + "a remote cannot read workflow inputs or steps", at: node.location)
            return nil
        }
        return .literal(Self.plain(node))
    }

    private static func firstExpression(in node: YAMLNode) -> String? {
        switch node.kind {
        case .scalar(let s): return s.jsonValue.stringValue.flatMap { $0.contains("${{") ? $0 : nil }
        case .sequence(let items): return items.lazy.compactMap { firstExpression(in: $0) }.first
        case .mapping(let pairs): return pairs.lazy.compactMap { firstExpression(in: $0.value) }.first
        }
    }

    static func plain(_ node: YAMLNode) -> JSONValue {
        switch node.kind {
        case .scalar(let s): return s.jsonValue
        case .sequence(let items): return .array(items.map(plain))
        case .mapping(let pairs):
            var o: [String: JSONValue] = [:]
            for pair in pairs where o[pair.name] == nil { o[pair.name] = plain(pair.value) }
            return .object(o)
        }
    }

    static func isEnvironmentName(_ name: String) -> Bool {
        guard let first = name.unicodeScalars.first, !("0"..."9").contains(first) else { return false }
        return name.unicodeScalars.allSatisfy {
            $0 == "_" || ("a"..."z").contains($0) || ("A"..."Z").contains($0) || ("0"..."9").contains($0)
        }
    }
}
