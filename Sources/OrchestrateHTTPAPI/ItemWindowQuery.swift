import Hummingbird
import OrchestrateStore

/// The window of a run's items that `GET /api/runs/{id}` carries: `items_limit` (1 to 1000,
/// default 100), then either `items_after` (the `items_next` cursor of the page before) or
/// `items_last=true` (the last ones; an `items_after` beside it is ignored). A session may hold 100,000 items: a detail is a page.
enum ItemWindowQuery {
    static func window(_ request: Request) throws -> ItemWindow {
        let parameters = request.uri.queryParameters
        var window = ItemWindow.first
        if let value = parameters.get("items_limit") {
            guard let n = Int(value), (1...ItemWindow.maxLimit).contains(n) else {
                throw Problem(.badRequest, "items_limit must be 1 to \(ItemWindow.maxLimit), not '\(value)'")
            }
            window.limit = n
        }
        if let value = parameters.get("items_after") {
            guard let cursor = ItemCursor(text: value) else {
                throw Problem(.badRequest, "items_after must be a cursor from items_next (SEQ:STEP), not '\(value)'")
            }
            window.after = cursor
        }
        if let value = parameters.get("items_last") {
            guard value == "true" || value == "false" else { throw Problem(.badRequest, "items_last must be true or false, not '\(value)'") }
            window.last = value == "true"
        }
        // The last page has no "after": items_last wins, as the document says (a query's
        // parameters cannot depend on each other in OpenAPI, so "not both" is not refused).
        if window.last { window.after = nil }
        return window
    }
}
