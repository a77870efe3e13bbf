/// Instances waiting for a slot, oldest first: taking the first is O(1).
///
/// An array's `removeFirst()` moves every element behind it, so starting the 10,000 items of a
/// fan-out one after another would cost O(n²). Here the taken ones stay behind a head index,
/// and the storage is compacted once they are the larger half.
///
/// Invariant: `elements[head...]` are the waiting instances, in the order they were appended.
struct StartQueue<Element> {
    private var elements: [Element] = []
    private var head = 0

    init(_ elements: [Element] = []) { self.elements = elements }

    var isEmpty: Bool { head == elements.count }
    var count: Int { elements.count - head }
    var first: Element? { isEmpty ? nil : elements[head] }

    mutating func append(_ element: Element) { elements.append(element) }

    /// Drops the first element; the queue must not be empty.
    mutating func removeFirst() {
        precondition(!isEmpty, "removeFirst of an empty StartQueue")
        head += 1
        if head == elements.count {
            elements.removeAll(keepingCapacity: true)
            head = 0
        } else if head >= 1024 && head * 2 >= elements.count {
            elements.removeFirst(head)
            head = 0
        }
    }

    mutating func removeAll() {
        elements.removeAll()
        head = 0
    }
}
