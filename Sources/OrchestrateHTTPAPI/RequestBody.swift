import Hummingbird
import OrchestrateJSON

extension Request {
    /// The body as a JSON object. Larger than `APIContext.maxBodySize` → 413 (thrown by
    /// `collect`); not a JSON object → 400.
    func jsonObject(_ context: APIContext) async throws -> [String: JSONValue] {
        let buffer = try await body.collect(upTo: APIContext.maxBodySize)
        guard buffer.readableBytes > 0 else { throw Problem(.badRequest, "the request needs a JSON object as its body") }
        let value: JSONValue
        do {
            value = try JSONValue(parsing: Array(buffer.readableBytesView))
        } catch {
            throw Problem(.badRequest, "the body is not valid JSON: \(error)")
        }
        guard let object = value.objectValue else { throw Problem(.badRequest, "the body must be a JSON object") }
        return object
    }
}

/// Typed reads of a request's JSON members, with 400s that name the member.
extension Dictionary where Key == String, Value == JSONValue {
    /// Whether member `key` is there and not null (a null member counts as not given).
    func has(_ key: String) -> Bool {
        self[key].map { $0 != .null } ?? false
    }

    func string(_ key: String) throws -> String? {
        guard let value = self[key], value != .null else { return nil }
        guard let text = value.stringValue else { throw Problem(.badRequest, "'\(key)' must be a string") }
        return text
    }

    func int(_ key: String) throws -> Int64? {
        guard let value = self[key], value != .null else { return nil }
        guard let number = value.intValue else { throw Problem(.badRequest, "'\(key)' must be an integer") }
        return number
    }

    func object(_ key: String) throws -> [String: JSONValue]? {
        guard let value = self[key], value != .null else { return nil }
        guard let object = value.objectValue else { throw Problem(.badRequest, "'\(key)' must be a JSON object") }
        return object
    }
}
