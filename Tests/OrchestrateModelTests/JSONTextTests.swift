import Foundation
import OrchestrateJSON
import Testing

/// The JSON writer (`jsonText`, `jsonBytes`, `prettyJSONText`): what the store journals and the
/// HTTP API sends, where a run label or file name is hostile input. Every string must come out
/// escaped exactly as RFC 8259 asks and read back as itself.
@Suite struct JSONTextTests {
    @Test func escapesQuotesBackslashesAndControlCharacters() {
        let value: JSONValue = .string("a\"b\\c\nd\re\tf\u{0}g\u{1F}h\u{08}i\u{0C}j")
        #expect(value.jsonText == #""a\"b\\c\nd\re\tf\u0000g\u001fh\u0008i\u000cj""#)
    }

    @Test func nonASCIIIsWrittenAsItsUTF8() {
        let value: JSONValue = ["é/日本/🎞️": .string("Ünïcode \u{7F} \u{2028} 🚀")]
        #expect(value.jsonText == "{\"é/日本/🎞️\":\"Ünïcode \u{7F} \u{2028} 🚀\"}")
        #expect(value.jsonBytes == Array(value.jsonText.utf8))
    }

    @Test func hostileStringsReadBackAsThemselves() throws {
        let hostile = ["</script><script>alert(1)</script>", "\"}, \"admin\": true, {\"", "\\\\\\\"", "\u{1}\u{2}\u{1B}[31m",
                       "tab\there", "a\u{0}b", "", "\"", "\\", "ｆｕｌｌ　ｗｉｄｔｈ", "\u{10FFFF}", "e\u{301}"]
        for text in hostile {
            let value: JSONValue = ["label": .string(text), text: .array([.string(text), .int(1)])]
            let written = value.jsonText
            #expect(!written.unicodeScalars.contains { $0.value < 0x20 }, "a raw control character in \(written)")
            #expect(try JSONValue(parsing: written) == value, "\(written)")
            #expect(try JSONValue(parsing: value.prettyJSONText) == value)
        }
    }

    /// Strings are read whole when they hold no escape, in runs around escapes otherwise: both
    /// ways give the same text, and both refuse bytes that are not UTF-8.
    @Test func stringsReadWholeOrInRunsAndInvalidUTF8IsRefused() throws {
        let plain = "caf\u{e9} \u{1F600} <b>"
        #expect(try JSONValue(parsing: Array("[\"\(plain)\"]".utf8)) == [.string(plain)])
        #expect(try JSONValue(parsing: Array(#"["a\"b\u00e9\ud83d\ude00c","\n"]"#.utf8)) == [.string("a\"b\u{e9}\u{1F600}c"), .string("\n")])
        for bytes: [UInt8] in [[0x22, 0x61, 0xFF, 0x22], [0x22, 0x5C, 0x6E, 0xC3, 0x22], [0x22, 0xC3, 0x5C, 0x6E, 0x22]] {
            #expect(throws: JSONParseError.self) { try JSONValue(parsing: bytes) }
        }
    }

    @Test func numbersKeysAndLayout() {
        let value: JSONValue = ["b": [1, -7, 0, 9, 10, 1.5, 2.0, -0.25, 1e20], "a": nil, "c": [true, false], "d": [:], "e": []]
        #expect(value.jsonText == #"{"a":null,"b":[1,-7,0,9,10,1.5,2.0,-0.25,1e+20],"c":[true,false],"d":{},"e":[]}"#)
        #expect(JSONValue.int(.min).jsonText == "-9223372036854775808")
        #expect(JSONValue.double(.nan).jsonText == "null")
        let nested: JSONValue = ["x": ["y": [1, 2]]]
        #expect(nested.prettyJSONText == """
            {
              "x": {
                "y": [
                  1,
                  2
                ]
              }
            }
            """)
    }

    @Test func stringsNeedingNoEscapeAreWrittenWhole() {
        let value: JSONValue = ["uses": "test.noop", "path": "/vidéos/été ✓/🎬.mov", "empty": ""]
        #expect(value.jsonText == #"{"empty":"","path":"/vidéos/été ✓/🎬.mov","uses":"test.noop"}"#)
    }

    @Test func keysAreSortedAndNestedValuesKeepTheirOrder() throws {
        let value: JSONValue = ["b": [3, 1, 2], "a": ["z": true, "y": .null], "c": 1.5]
        #expect(value.jsonText == #"{"a":{"y":null,"z":true},"b":[3,1,2],"c":1.5}"#)
        #expect(try JSONValue(parsing: value.jsonText) == value)
    }

    /// An object with members spliced in as text already written (a run detail's cached graph)
    /// is the same text as the whole object written at once: sorted keys, the splice where its
    /// key sorts, a spliced key replacing a member of the same name.
    @Test func splicedMembersComeOutAsTheWholeObjectWould() throws {
        let graph: JSONValue = [["id": "a\"</script>", "needs": []], ["id": "b", "needs": ["a"]]]
        let object: JSONValue = ["status": "running", "id": "r1", "steps": [["id": "a"]], "zeta": 1.5, "graph": "stale"]
        let spliced = JSONObjectText.bytes(object.objectValue!, adding: ["graph": graph.jsonText])
        var whole = object.objectValue!
        whole["graph"] = graph
        #expect(String(decoding: spliced, as: UTF8.self) == JSONValue.object(whole).jsonText)
        #expect(JSONObjectText.bytes([:], adding: [:]) == Array("{}".utf8))
        #expect(try JSONValue(parsing: spliced) == .object(whole))
    }
}
