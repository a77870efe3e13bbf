import Foundation

/// Where the state lives, as `--store` / `$ORCHESTRATE_STORE` say:
///
/// - `sqlite:DIR` — one SQLite database in DIR (what `--state DIR` means; the default);
/// - `postgresql://USER@HOST:PORT/DB?sslmode=…` or `postgres://…` — a PostgreSQL database that
///   several machines share;
/// - a libpq key-value string, `host=db.internal dbname=orchestrate user=orc`.
///
/// PostgreSQL settings are libpq's own (`sslmode`, `sslrootcert`, `passfile`…, and the `PG*`
/// environment variables): put the password in a password file (`~/.pgpass`, `PGPASSFILE` or
/// `passfile=`), not in the URL, where `ps` would show it.
///
/// ```swift
/// let store = try StoreLocation.parse("postgresql://orc@db/orchestrate").open()
/// ```
public enum StoreLocation: Sendable, Equatable {
    case sqlite(directory: String)
    case postgres(connection: String)

    public struct Invalid: Error, CustomStringConvertible {
        public let description: String
    }

    public static func parse(_ text: String) throws -> StoreLocation {
        if text.hasPrefix("sqlite:") {
            let directory = String(text.dropFirst("sqlite:".count))
            guard !directory.isEmpty else { throw Invalid(description: "sqlite: needs a directory, as in sqlite:/var/lib/orchestrate") }
            return .sqlite(directory: directory)
        }
        if text.hasPrefix("postgresql://") || text.hasPrefix("postgres://") || text.contains("=") {
            return .postgres(connection: text)
        }
        throw Invalid(description: "--store takes sqlite:DIR, a postgresql:// URL or a libpq key=value string, not '\(ConnectionText.redacted(text))'")
    }

    /// The location as it may be shown to people and written to logs: without a password.
    public var redacted: String {
        switch self {
        case .sqlite(let directory): return "sqlite:\(directory)"
        case .postgres(let connection): return ConnectionText.redacted(connection)
        }
    }

    /// Whether the text carries a password (which `ps` shows to every local user).
    public var hasInlinePassword: Bool {
        guard case .postgres(let connection) = self else { return false }
        return ConnectionText.redacted(connection) != connection
    }
}

/// Hiding the password of a PostgreSQL connection string.
public enum ConnectionText {
    /// `postgresql://orc:secret@db/x` → `postgresql://orc:***@db/x`; `password=secret` →
    /// `password=***` (quoted values included).
    public static func redacted(_ text: String) -> String {
        if text.hasPrefix("postgresql://") || text.hasPrefix("postgres://") {
            var result = text
            // user:password@ in the authority part.
            if let schemeEnd = result.range(of: "://"),
               let at = result[schemeEnd.upperBound...].firstIndex(of: "@"),
               let colon = result[schemeEnd.upperBound..<at].firstIndex(of: ":")
            {
                result.replaceSubrange(result.index(after: colon)..<at, with: "***")
            }
            // ?password=… or &password=… in the query.
            if let regex = try? NSRegularExpression(pattern: "([?&]password=)[^&]*") {
                result = regex.stringByReplacingMatches(in: result, range: NSRange(result.startIndex..., in: result),
                                                        withTemplate: "$1***")
            }
            return result
        }
        guard let regex = try? NSRegularExpression(pattern: "(password\\s*=\\s*)('(?:[^'\\\\]|\\\\.)*'|\\S*)") else { return text }
        return regex.stringByReplacingMatches(in: text, range: NSRange(text.startIndex..., in: text), withTemplate: "$1***")
    }
}
