import OrchestrateJSON
import Testing

/// The journal's JSON text (events, outputs, inputs): escapes exactly what RFC 8259 requires,
/// keeps everything else as written, and reads back to the same value.
@Suite struct JSONTextTests {
    @Test func stringsNeedingNoEscapeAreWrittenWhole() {
        let value: JSONValue = ["uses": "test.noop", "path": "/vidéos/été ✓/🎬.mov", "empty": ""]
        #expect(value.jsonText == #"{"empty":"","path":"/vidéos/été ✓/🎬.mov","uses":"test.noop"}"#)
    }

    @Test func quotesBackslashesAndControlCharactersAreEscaped() throws {
        let nasty = "say \"hi\" \\ é\n\r\t\u{1}\u{1F}🎬 end"
        let text = JSONValue.object(["m": .string(nasty)]).jsonText
        #expect(text == #"{"m":"say \"hi\" \\ é\n\r\t\u0001\u001f🎬 end"}"#)
        #expect(try JSONValue(parsing: text) == ["m": .string(nasty)])
    }

    @Test func keysAreSortedAndNestedValuesKeepTheirOrder() throws {
        let value: JSONValue = ["b": [3, 1, 2], "a": ["z": true, "y": .null], "c": 1.5]
        #expect(value.jsonText == #"{"a":{"y":null,"z":true},"b":[3,1,2],"c":1.5}"#)
        #expect(try JSONValue(parsing: value.jsonText) == value)
    }
}
