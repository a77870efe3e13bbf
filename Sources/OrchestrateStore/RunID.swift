import Foundation

/// The one rule for run ids, checked wherever an id enters (`submit --id`, `run --id`, the
/// API's `"id"` and path parameters, every command that names a run) and before any path is
/// made from one: an id is a path segment (`STATE/runs/ID`) and a URL segment
/// (`/api/runs/ID`), so it is 1 to 64 letters, digits, `.`, `_` or `-`, and not dots alone
/// (`.` and `..` are path segments a file system and a URL client give a meaning of their own).
/// The generated ids (`20261127-171000-abcdefgh`) and the watch folders' `watch-…-N` follow it.
public enum RunID {
    public static let maximumLength = 64
    public static let rule = "a run id is 1 to 64 letters, digits, '.', '_' or '-', not dots alone"

    public static func isValid(_ id: String) -> Bool { PathSafeName.isValid(id, maximumLength: maximumLength) }

    /// A run id refused: what was wrong, and (for an id a store already holds, written by a
    /// version that did not check ids) that nothing will be done to that run.
    public struct Invalid: Error, CustomStringConvertible, Sendable {
        public let id: String
        public let stored: Bool

        public init(id: String, stored: Bool) {
            self.id = id
            self.stored = stored
        }

        public var description: String {
            let shown = RunID.shown(id)
            if stored {
                return "the store holds a run with the id \(shown), which is not a valid run id (\(RunID.rule)); "
                    + "it was made by a version that did not check ids, and orchestrate refuses to act on it "
                    + "(its directory would not stay inside runs/)"
            }
            return "the run id \(shown) is not valid: \(RunID.rule)"
        }
    }

    /// Throws `Invalid` unless `id` follows the rule.
    public static func check(_ id: String, stored: Bool = false) throws(Invalid) {
        guard isValid(id) else { throw Invalid(id: id, stored: stored) }
    }

    /// The id quoted for a message: control characters and non-ASCII escaped, cut at 80
    /// characters, so a hostile id cannot write to the terminal or flood a log.
    static func shown(_ id: String) -> String {
        var text = ""
        for scalar in id.unicodeScalars.prefix(80) {
            if scalar.isASCII && scalar.value >= 0x20 && scalar.value != 0x7F && scalar != "'" && scalar != "\\" {
                text.unicodeScalars.append(scalar)
            } else {
                text += "\\u{" + String(scalar.value, radix: 16) + "}"
            }
        }
        return "'" + text + (id.unicodeScalars.count > 80 ? "…" : "") + "' (\(id.utf8.count) bytes)"
    }
}

/// Names that become path and URL segments (run ids, queue names): ASCII letters, digits,
/// `.`, `_`, `-`, not dots alone.
enum PathSafeName {
    static func isValid(_ name: String, maximumLength: Int) -> Bool {
        !name.isEmpty && name.utf8.count <= maximumLength
            && name.utf8.allSatisfy { byte in
                (byte >= 0x30 && byte <= 0x39) || (byte >= 0x41 && byte <= 0x5A) || (byte >= 0x61 && byte <= 0x7A)
                    || byte == 0x2E || byte == 0x5F || byte == 0x2D
            }
            && name.utf8.contains { $0 != 0x2E }
    }
}
