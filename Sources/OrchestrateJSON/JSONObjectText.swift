/// Writes one compact JSON object member by member, for a caller that holds some member values
/// as JSON text already (an event's data as the store keeps it) and should not parse them only
/// to write them again (bench/api: the event streams re-encoded every journaled event).
///
/// The caller adds the members in key order, so that the text is the same as `jsonText` of the
/// same object (which sorts its keys):
///
/// ```swift
/// var object = JSONObjectText()
/// object.add("data", jsonText: storedText)   // copied as it is
/// object.add("seq", .int(42))
/// let bytes = object.finish()
/// ```
public struct JSONObjectText {
    private var writer = JSONWriter(pretty: false)
    private var empty = true

    public init() {
        writer.bytes.append(UInt8(ascii: "{"))
    }

    /// An object whose text is expected to take about `capacity` bytes (reserved at once).
    public init(capacity: Int) {
        writer = JSONWriter(pretty: false, capacity: capacity)
        writer.bytes.append(UInt8(ascii: "{"))
    }

    /// Adds `key: value`; keys must come in increasing order.
    public mutating func add(_ key: String, _ value: JSONValue) {
        writeKey(key)
        writer.write(value, indent: 0)
    }

    /// Adds `key: text`, where `text` is one compact JSON value as `jsonText` writes it (it is
    /// copied, not checked); keys must come in increasing order.
    public mutating func add(_ key: String, jsonText text: String) {
        writeKey(key)
        writer.bytes.append(contentsOf: text.utf8)
    }

    /// Adds `key: [ … ]`, an array of objects, each written by `write` into the same buffer
    /// (members in increasing key order, as for `add`): a long list without a dictionary per
    /// element (a run detail's steps).
    public mutating func addObjects<Elements: Sequence>(_ key: String, _ elements: Elements,
                                                        _ write: (inout JSONObjectText, Elements.Element) -> Void)
    {
        writeKey(key)
        writer.bytes.append(UInt8(ascii: "["))
        var element = JSONObjectText(unopened: ())
        for (index, value) in elements.enumerated() {
            if index > 0 { writer.bytes.append(UInt8(ascii: ",")) }
            // The element writes into this object's buffer (swapped, not copied).
            swap(&element.writer, &writer)
            element.writer.bytes.append(UInt8(ascii: "{"))
            element.empty = true
            write(&element, value)
            element.writer.bytes.append(UInt8(ascii: "}"))
            swap(&element.writer, &writer)
        }
        writer.bytes.append(UInt8(ascii: "]"))
    }

    private init(unopened: Void) {
        writer = JSONWriter(pretty: false, capacity: 0)
    }

    /// The text of `object` with `texts` added as members whose values are JSON text already
    /// written (copied as they are): a run's detail with its graph encoded once per workflow.
    public static func bytes(_ object: [String: JSONValue], adding texts: [String: String]) -> [UInt8] {
        var writer = JSONObjectText()
        for key in Set(object.keys).union(texts.keys).sorted() {
            if let text = texts[key] { writer.add(key, jsonText: text) } else if let value = object[key] { writer.add(key, value) }
        }
        return writer.finish()
    }

    /// The object's text as UTF-8 bytes.
    public consuming func finish() -> [UInt8] {
        writer.bytes.append(UInt8(ascii: "}"))
        return writer.bytes
    }

    private mutating func writeKey(_ key: String) {
        if !empty { writer.bytes.append(UInt8(ascii: ",")) }
        empty = false
        writer.writeString(key)
        writer.bytes.append(UInt8(ascii: ":"))
    }
}
