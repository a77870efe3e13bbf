/// The items of a fan-out (`for_each`) that have not started have no row of their own: the
/// fan-out's row holds the whole list (`item`), and an item's row is written when it first
/// starts, in the commit that journals its start: not written at the expansion and again at
/// its start, which would double a fan-out item's writes.
///
/// The stores' readers of steps (`steps(ofRun:)`, `runDetail`) list such an item as what it
/// is, a pending item, so every caller (a resume, `status`, the API) sees each item of the list.
/// A secret's value in the list is masked here as in every row; the engine keeps the real
/// elements in memory and, on resume, evaluates the list again (`RunExecutor.boundItem`).
public enum UnstartedItems {
    /// The id of the `index`th item of fan-out `step`: `upload[3]`.
    public static func id(step: String, index: Int) -> String { "\(step)[\(index)]" }

    /// `steps` and, after them, a pending record for each item a fan-out of `steps` lists that
    /// has no record in `steps`.
    public static func adding(to steps: [StepRecord]) -> [StepRecord] {
        var fanOuts: [StepRecord] = []
        var itemRows: [String: Int] = [:]
        for step in steps {
            switch step.kind {
            case .fanOut: fanOuts.append(step)
            case .item: itemRows[step.step, default: 0] += 1
            case .step, .compensation: break
            }
        }
        var all = steps
        for fanOut in fanOuts {
            // Item rows are only ever written for indexes of the list: as many rows, none missing.
            guard let list = fanOut.item?.arrayValue, itemRows[fanOut.step, default: 0] < list.count else { continue }
            let present = Set(steps.lazy.filter { $0.kind == .item && $0.step == fanOut.step }.compactMap(\.itemIndex))
            for (index, item) in list.enumerated() where !present.contains(index) {
                var record = StepRecord(runID: fanOut.runID, id: id(step: fanOut.step, index: index), step: fanOut.step,
                                        kind: .item)
                record.itemIndex = index
                record.item = item
                all.append(record)
            }
        }
        return all
    }
}
