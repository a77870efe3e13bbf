import Hummingbird
import OrchestrateStore

/// Path parameters as their names and ids: the router hands them over as sent, percent-encoded;
/// they are decoded here, once (`%252E` stays `%2E`), so `/api/runs/%2E%2E` means the id `..`
/// (and is refused) and an id a client chose to encode is still found.
extension Parameters {
    /// The parameter `name`, percent-decoded once; 400 when it does not decode.
    func decoded(_ name: String) throws -> String {
        let raw = try require(name)
        guard let text = raw.removingPercentEncoding else {
            throw Problem(.badRequest, "the path segment '\(raw)' is not valid percent-encoding")
        }
        return text
    }

    /// The run id in the path, decoded once and checked against the run id rule: 400 for an
    /// id that breaks it (nothing is looked up or acted on).
    func runID(_ name: String = "id") throws -> String {
        let id = try decoded(name)
        do { try RunID.check(id) } catch { throw Problem(.badRequest, error.description) }
        return id
    }
}
