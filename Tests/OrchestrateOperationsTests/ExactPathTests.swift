import OrchestrateExactPath
import Testing

/// ExactPath compares, hashes and tests prefixes by bytes, where String goes by Unicode
/// equivalence.
@Suite struct ExactPathTests {
    let precomposed = "/srv/caf\u{E9}", decomposed = "/srv/cafe\u{301}"

    @Test func equivalentNamesAreDifferentPaths() {
        #expect(precomposed == decomposed)
        #expect(ExactPath(precomposed) != ExactPath(decomposed))
        #expect(Set([ExactPath(precomposed), ExactPath(decomposed)]).count == 2)
        #expect(ExactPath(precomposed) == ExactPath("/srv/caf\u{E9}"))
        #expect(ExactPath(precomposed).hashValue == ExactPath("/srv/caf\u{E9}").hashValue)
    }

    @Test func insideIsByBytes() {
        #expect(decomposed.hasPrefix(precomposed))
        #expect(!ExactPath(decomposed + "/x").isInside(ExactPath(precomposed)))
        #expect(!ExactPath(decomposed).isInside(ExactPath(precomposed)))
        #expect(ExactPath(precomposed + "/x").isInside(ExactPath(precomposed)))
        #expect(ExactPath(precomposed).isInside(ExactPath(precomposed)))
        #expect(!ExactPath(precomposed + "x").isInside(ExactPath(precomposed)))
        #expect(ExactPath("/anything").isInside(ExactPath("/")))
        #expect(!ExactPath("relative").isInside(ExactPath("/")))
    }

    @Test func droppingAPrefixKeepsTheRestsBytes() {
        let key = ExactPath("p/" + "cafe\u{301}/x")
        #expect(key.hasPrefix(ExactPath("p/")))
        #expect(Array(key.dropping(ExactPath("p/")).utf8) == Array("cafe\u{301}/x".utf8))
    }
}

/// PathBytes takes paths apart at "/" bytes, where String goes by characters (a "/" that a
/// combining mark follows is one character).
@Suite struct PathBytesTests {
    @Test func aSlashACombiningMarkFollowsIsStillASlash() {
        let planted = "../\u{301}/evil"
        #expect(planted.split(separator: "/").count == 2)  // what String does: no ".." component
        #expect(PathBytes.components(planted) == ["..", "\u{301}", "evil"])
        #expect(PathBytes.components("/a//b/", omittingEmpty: true) == ["a", "b"])
        #expect(PathBytes.components("a//b") == ["a", "", "b"])
        #expect(PathBytes.contains("a/\u{301}x", PathBytes.slash) && !"a/\u{301}x".contains("/"))
        let split = PathBytes.splitAtLastSlash("dir/\u{200C}name")
        #expect(split?.head == "dir" && split?.tail == "\u{200C}name")
        #expect(PathBytes.splitAtLastSlash("name") == nil)
    }

    @Test func listedNamesThatCannotBeOneLocalComponentAreRefused() {
        for bad in ["", ".", "..", "a/b", "../\u{301}x", "/\u{301}", "a\\b", "new\nline", "del\u{7F}"] {
            #expect(!PathBytes.isSafeListedName(bad), "\(bad.debugDescription)")
        }
        for good in ["clip.mov", "caf\u{E9}", "cafe\u{301}", ".hidden", "...", "\u{301}x"] {
            #expect(PathBytes.isSafeListedName(good), "\(good.debugDescription)")
        }
        #expect(PathBytes.quoted("a\nb") == "\"a\\u{a}b\"")
        #expect(PathBytes.quoted("\u{9B}31m\u{202E}vom.exe") == "\"\\u{9b}31m\\u{202e}vom.exe\"")
    }

    @Test func aLastComponentIsCutAtTheSlashByteAndIgnoresTrailingSlashes() {
        #expect(Array(PathBytes.lastComponent("sub/\u{301}x.bin").utf8) == Array("\u{301}x.bin".utf8))
        #expect(PathBytes.lastComponent("media/") == "media")
        #expect(PathBytes.lastComponent("name") == "name")
        #expect(PathBytes.lastComponent("/") == "" && PathBytes.lastComponent("") == "")
    }

    /// Byte order, not String's: "e\u{301}" and "\u{E9}" are distinct names that String's `<`
    /// compares as equal, and "e\u{301}" sorts after "f" by String (as "\u{E9}") but before it by bytes.
    @Test func treeOrderIsByteOrder() {
        #expect(PathBytes.precedes("e\u{301}.txt", "f.txt") && !("e\u{301}.txt" < "f.txt"))
        #expect(PathBytes.precedes("e\u{301}", "\u{E9}") != PathBytes.precedes("\u{E9}", "e\u{301}"))
        let names = ["\u{E9}", "f", "e\u{301}", "E"]
        #expect(names.sorted(by: PathBytes.precedes).map { Array($0.utf8) } == [[0x45], [0x65, 0xCC, 0x81], [0x66], [0xC3, 0xA9]])
    }
}
