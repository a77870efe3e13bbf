import OrchestrateStore
import Testing

/// The `SEQ:STEP` text of an item cursor, as the API and `status` take it back: any step name
/// after the first colon, whatever Unicode follows the colon.
@Suite struct ItemCursorTests {
    @Test(arguments: [
        ("12:upload", 12, "upload"),
        ("0:a:b", 0, "a:b"),
        // An emoji modifier and a combining mark right after the colon join it into one
        // Character; the colon must still split the text.
        ("5462191314449:\u{1F3FB}\u{0003}x", 5462191314449, "\u{1F3FB}\u{0003}x"),
        ("7:\u{0301}e", 7, "\u{0301}e"),
    ])
    func parses(text: String, seq: Int64, step: String) throws {
        let cursor = try #require(ItemCursor(text: text))
        #expect(cursor.seq == seq && cursor.stepID == step)
        #expect(ItemCursor(text: cursor.text) == cursor)
    }

    @Test(arguments: ["", ":", "12:", ":step", "-1:step", "x:step", "1\u{0301}:step", "99999999999999999999:step"])
    func refuses(text: String) {
        #expect(ItemCursor(text: text) == nil)
    }
}
