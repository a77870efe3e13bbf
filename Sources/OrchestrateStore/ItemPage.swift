/// Cutting a window's read down to the window: each store reads one item more than the window
/// holds, which tells whether others follow it.
enum ItemPage {
    /// Drops the extra item read (if any) and puts a window of the last items back in their
    /// order; returns where the next page starts (a forward window that others follow), or nil.
    static func cut(_ items: inout [ItemRecord], _ window: ItemWindow) -> ItemCursor? {
        let more = items.count > window.limit
        if more { items.removeLast(items.count - window.limit) }
        if window.last {
            items.reverse()
            return nil
        }
        guard more, let last = items.last else { return nil }  // a window of no items (counts only) has no next page
        return ItemCursor(stepID: last.stepID, seq: last.seq)
    }
}
