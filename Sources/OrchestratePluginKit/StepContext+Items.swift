import COrchestratePlugin
import OrchestrateJSON

/// An item handed to a long-lived step (`acceptsItems`), e.g. a path added with
/// `orchestrate add-path`.
public struct StepItem: Sendable {
    /// Pass it back to `itemDone`.
    public let id: String
    /// The item as JSON text, and parsed (nil if the host sent something unparsable).
    public let json: String
    public let value: JSONValue?
    /// What `saveItemCheckpoint` stored for this item in an earlier attempt.
    public let checkpoint: [UInt8]?
}

/// What `nextItem` found.
public enum ItemWait: Sendable {
    case item(StepItem)
    /// Nothing within the timeout (or the step was cancelled: check `isCancelled`).
    case timeout
    /// The session is closing and every item was handed out: finish and return.
    case closed
}

/// The session API of long-lived steps:
///
/// ```swift
/// while true {
///     switch step.nextItem(timeout: .milliseconds(500)) {
///     case .closed: return
///     case .timeout: try step.checkCancellation()
///     case .item(let item):
///         do { try transfer(item); step.itemDone(item.id) }
///         catch { step.itemDone(item.id, error: "\(error)") }
///     }
/// }
/// ```
extension StepContext {
    /// Waits up to `timeout` for the next item. Safe to call from several threads at once.
    public func nextItem(timeout: Duration) -> ItemWait {
        var item = orc_item()
        item.struct_size = UInt32(MemoryLayout<orc_item>.size)
        let (seconds, attoseconds) = timeout.components
        let ms = seconds * 1000 + attoseconds / 1_000_000_000_000_000
        switch api.pointee.next_item(host, ms, &item) {
        case Int32(ORC_ITEM_READY):
            let json = item.json.map { String(cString: $0) } ?? "{}"
            let checkpoint = item.checkpoint.map { Array(UnsafeBufferPointer(start: $0, count: item.checkpoint_size)) }
            return .item(StepItem(id: item.id.map { String(cString: $0) } ?? "", json: json,
                                  value: try? JSONValue(parsing: json), checkpoint: checkpoint))
        case Int32(ORC_ITEM_CLOSED):
            return .closed
        default:
            return .timeout
        }
    }

    /// Reports an item finished: `error` nil for success. A finished item is never handed out
    /// again; an unreported one is, on the next attempt.
    public func itemDone(_ id: String, error: String? = nil) {
        api.pointee.item_done(host, id, error == nil ? 1 : 0, error)
    }

    /// Reports an item failed with `error`'s kind and code: a retryable one is handed out again
    /// later (the step's `retry:`; held while its host does not answer, code `unreachable`), a
    /// permanent one is finished. An older host without `orchestrate.item-failure.v1` finishes
    /// it either way.
    public func itemFailed(_ id: String, _ error: StepError) {
        guard let table = itemFailure, let itemFailed = table.pointee.item_failed else {
            return itemDone(id, error: error.message)
        }
        let retryAfter = error.retryAfter.map { d -> Int64 in
            let (seconds, attoseconds) = d.components
            return seconds * 1000 + attoseconds / 1_000_000_000_000_000
        } ?? -1
        itemFailed(host, id, error.kind.rawValue, error.code, error.message, retryAfter)
    }

    /// Saves an item's checkpoint; true when durable.
    @discardableResult
    public func saveItemCheckpoint(_ id: String, _ bytes: [UInt8]) -> Bool {
        bytes.withUnsafeBufferPointer { api.pointee.save_item_checkpoint(host, id, $0.baseAddress, $0.count) } == 0
    }

    public func itemProgress(_ id: String, bytesDone: Int64, bytesTotal: Int64) {
        api.pointee.item_progress(host, id, bytesDone, bytesTotal)
    }
}
