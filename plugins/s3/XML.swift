/// The little of XML that S3's answers need: the text of an element, the elements of a list.
/// S3 documents are flat and regular; this reads them without a parser (no Foundation in
/// plugins), and decodes the five entities and numeric references.
enum XML {
    /// The text of the first `<tag>…</tag>` in `text`, decoded; nil when absent.
    static func value(_ tag: String, in text: Substring) -> String? {
        guard let open = text.firstRange(of: "<\(tag)>") else {
            return text.contains("<\(tag)/>") ? "" : nil
        }
        guard let close = text[open.upperBound...].firstRange(of: "</\(tag)>") else { return nil }
        return decode(text[open.upperBound ..< close.lowerBound])
    }

    static func value(_ tag: String, in text: String) -> String? { value(tag, in: Substring(text)) }

    /// The contents of every `<tag>…</tag>` in `text`, in order.
    static func elements(_ tag: String, in text: String) -> [Substring] {
        var out: [Substring] = []
        var rest = Substring(text)
        while let open = rest.firstRange(of: "<\(tag)>"), let close = rest[open.upperBound...].firstRange(of: "</\(tag)>") {
            out.append(rest[open.upperBound ..< close.lowerBound])
            rest = rest[close.upperBound...]
        }
        return out
    }

    static func decode(_ text: Substring) -> String {
        guard text.contains("&") else { return String(text) }
        var out = ""
        var rest = text
        while let amp = rest.firstIndex(of: "&") {
            out += rest[..<amp]
            guard let semi = rest[amp...].firstIndex(of: ";"), rest.distance(from: amp, to: semi) <= 10 else {
                out += "&"
                rest = rest[rest.index(after: amp)...]
                continue
            }
            let name = rest[rest.index(after: amp) ..< semi]
            switch name {
            case "amp": out += "&"
            case "lt": out += "<"
            case "gt": out += ">"
            case "quot": out += "\""
            case "apos": out += "'"
            default:
                let number = name.hasPrefix("#x") ? UInt32(name.dropFirst(2), radix: 16) : name.hasPrefix("#") ? UInt32(name.dropFirst()) : nil
                if let number, let scalar = Unicode.Scalar(number) { out.unicodeScalars.append(scalar) } else { out += "&\(name);" }
            }
            rest = rest[rest.index(after: semi)...]
        }
        return out + rest
    }

    /// `text` with &, <, > escaped (a part's ETag in CompleteMultipartUpload).
    static func escape(_ text: String) -> String {
        var out = ""
        for c in text {
            switch c {
            case "&": out += "&amp;"
            case "<": out += "&lt;"
            case ">": out += "&gt;"
            case "\"": out += "&quot;"
            default: out.append(c)
            }
        }
        return out
    }
}
