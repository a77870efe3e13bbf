/// The engine's side of one step call: where the plugin's callbacks end up.
///
/// Every method is called on a plugin thread (the one running the step or one it created), so
/// implementations must be thread-safe and must not block for long, except `nextItem`, which
/// waits up to `timeout`. The host calls `nextItem` in slices of at most 100 ms so a cancelled
/// step is noticed between slices; an implementation need not watch for cancellation itself.
///
/// Strings and bytes are copies; the delegate may keep them. Secret redaction is the delegate's
/// job (the host does not know which values are secret).
public protocol StepHostDelegate: AnyObject, Sendable {
    /// One line (the host splits multi-line messages; no trailing newline).
    func log(_ level: LogLevel, _ message: String)
    /// Called as often as the plugin likes: throttle here.
    func progress(_ progress: StepProgress)
    /// Stores the step's checkpoint durably; returns true once it is durable.
    func saveCheckpoint(_ data: [UInt8]) -> Bool
    /// Waits up to `timeout` for the next item of a long-lived step.
    func nextItem(timeout: Duration) -> NextItem
    /// Item `id` has finished; `error` is nil on success.
    func itemDone(id: String, error: String?)
    /// Item `id` failed with an error kind (`orchestrate.item-failure.v1`): retried or finished
    /// as the step's policy says.
    func itemFailed(id: String, failure: StepFailure)
    /// Stores an item's checkpoint durably; returns true once it is durable.
    func saveItemCheckpoint(id: String, data: [UInt8]) -> Bool
    func itemProgress(id: String, bytesDone: Int64, bytesTotal: Int64)
}

extension StepHostDelegate {
    /// A delegate that does not retry items finishes a failed one.
    public func itemFailed(id: String, failure: StepFailure) {
        itemDone(id: id, error: failure.message)
    }
}
