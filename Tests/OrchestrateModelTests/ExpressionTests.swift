// The expression language: parsing, evaluation, precedence, functions and errors.
import OrchestrateJSON
@testable import OrchestrateModel
import Testing

private let context = EvaluationContext(
    inputs: [
        "n": 42, "ratio": 0.5, "name": "clip.mov", "list": [10, 20, 30], "empty": "",
        "obj": ["k-1": "v", "nested": ["deep": true]], "nothing": nil,
    ],
    secrets: ["token": "s3cret"],
    steps: [
        "create": ["status": "succeeded", "outputs": ["json": ["uri": "/videos/7", "size": 1024]]],
        "make-dir": ["status": "skipped", "outputs": [:]],
    ],
    run: ["id": "run-1", "dir": "/var/runs/run-1", "attempt": 2],
    item: "a.bin",
    env: ["HOME": "/home/u"])

private func eval(_ text: String, in ctx: EvaluationContext = context) throws -> JSONValue {
    try Expression(parsing: text).evaluate(in: ctx)
}

@Suite("Expressions")
struct ExpressionTests {
    @Test("literals keep their JSON types")
    func literals() throws {
        #expect(try eval("42") == .int(42))
        #expect(try eval("-7") == .int(-7))
        #expect(try eval("2.5") == .double(2.5))
        #expect(try eval("'it''s'") == "it's")
        #expect(try eval(#""tab\there""#) == "tab\there")
        #expect(try eval("true") == true)
        #expect(try eval("false") == false)
        #expect(try eval("null") == .null)
    }

    @Test("contexts: inputs, secrets, steps, run, item, env")
    func contexts() throws {
        #expect(try eval("inputs.n") == .int(42))
        #expect(try eval("secrets.token") == "s3cret")
        #expect(try eval("steps.create.outputs.json.uri") == "/videos/7")
        #expect(try eval("steps.create.status") == "succeeded")
        #expect(try eval("steps.make-dir.status") == "skipped")
        #expect(try eval("run.attempt") == .int(2))
        #expect(try eval("run.dir") == "/var/runs/run-1")
        #expect(try eval("item") == "a.bin")
        #expect(try eval("env.HOME") == "/home/u")
        #expect(try eval("env.NOPE") == .null)
    }

    @Test("a missing property is null, all the way down")
    func missingIsNull() throws {
        #expect(try eval("inputs.nope") == .null)
        #expect(try eval("inputs.nope.deeper.still") == .null)
        #expect(try eval("steps.absent.outputs.x") == .null)
        #expect(try eval("inputs.nothing.x") == .null)
        #expect(try eval("inputs.list[7]") == .null)
        #expect(try eval("inputs.obj['missing']") == .null)
    }

    @Test("property and index access")
    func access() throws {
        #expect(try eval("inputs.list[1]") == .int(20))
        #expect(try eval("inputs.list[0 + 2]") == .int(30))
        #expect(try eval("inputs.obj['k-1']") == "v")
        #expect(try eval("inputs.obj.nested.deep") == true)
        #expect(try eval("inputs['n']") == .int(42))
        #expect(try eval("steps['create'].outputs.json['size']") == .int(1024))
    }

    @Test("arithmetic keeps integers integral")
    func arithmetic() throws {
        #expect(try eval("1 + 2 * 3") == .int(7))
        #expect(try eval("(1 + 2) * 3") == .int(9))
        #expect(try eval("10 - 4 - 3") == .int(3))  // left-associative
        #expect(try eval("6 / 3") == .int(2))
        #expect(try eval("7 / 2") == .double(3.5))
        #expect(try eval("7 % 3") == .int(1))
        #expect(try eval("inputs.n * inputs.ratio") == .double(21))
        #expect(try eval("-inputs.n") == .int(-42))
        #expect(try eval("inputs.n - 2") == .int(40))
        #expect(try eval("2 * -3") == .int(-6))
    }

    @Test("+ concatenates when either side is a string")
    func concatenation() throws {
        #expect(try eval("'a' + 'b'") == "ab")
        #expect(try eval("'n=' + inputs.n") == "n=42")
        #expect(try eval("run.dir + '/' + inputs.name") == "/var/runs/run-1/clip.mov")
    }

    @Test("comparisons and equality")
    func comparisons() throws {
        #expect(try eval("1 < 2") == true)
        #expect(try eval("2 <= 2") == true)
        #expect(try eval("3 > 4") == false)
        #expect(try eval("4 >= 5") == false)
        #expect(try eval("'b' > 'a'") == true)
        #expect(try eval("1 == 1.0") == true)
        #expect(try eval("'1' == 1") == false)  // no conversions
        #expect(try eval("inputs.nope == null") == true)
        #expect(try eval("steps.create.status != 'failed'") == true)
        #expect(try eval("inputs.list == fromJSON('[10,20,30]')") == true)
    }

    @Test("logic: short-circuit, operand values, precedence")
    func logic() throws {
        #expect(try eval("!true || false") == false)
        #expect(try eval("!(true || false)") == false)
        #expect(try eval("true || false && false") == true)  // && binds tighter
        #expect(try eval("1 + 2 == 3 && 2 * 2 == 4") == true)
        #expect(try eval("1 < 2 == true") == true)  // comparison before equality
        #expect(try eval("inputs.nothing || 'fallback'") == "fallback")
        #expect(try eval("inputs.n && 'yes'") == "yes")
        #expect(try eval("inputs.empty && 'never'") == "")
        #expect(try eval("!inputs.empty") == true)
        // The right side is not evaluated when the left decides.
        #expect(try eval("false && 1 / 0 == 1") == false)
        #expect(try eval("true || 1 / 0 == 1") == true)
    }

    @Test("functions")
    func functions() throws {
        #expect(try eval("format('{0}-{1}', inputs.name, inputs.n)") == "clip.mov-42")
        #expect(try eval("format('{{literal}} {0}{0}', 'x')") == "{literal} xx")
        #expect(try eval("basename('/a/b/clip.mov')") == "clip.mov")
        #expect(try eval("basename('/a/b/')") == "b")
        #expect(try eval("dirname('/a/b/clip.mov')") == "/a/b")
        #expect(try eval("dirname('clip.mov')") == ".")
        #expect(try eval("dirname('/clip.mov')") == "/")
        // By bytes: a "/" that a combining mark follows still separates (as a String character
        // it does not), so a ".." hidden before it never reaches a destination built from them.
        #expect(try eval("basename('x/../\u{301}evil')") == "\u{301}evil")
        #expect(try eval("dirname('x/../\u{301}evil')") == "x/..")
        #expect(PathText.absolute("in/../\u{301}x", against: "/srv") == "/srv/\u{301}x")
        #expect(PathText.absolute("/srv/in/../../\u{301}x", against: "/") == "/\u{301}x")
        #expect(try eval("json(inputs.list)") == "[10,20,30]")
        #expect(try eval("json(inputs.obj.nested)") == #"{"deep":true}"#)
        #expect(try eval(#"fromJSON('{"a": [1, 2]}').a[1]"#) == .int(2))
        #expect(try eval("length(inputs.name)") == .int(8))
        #expect(try eval("length(inputs.list)") == .int(3))
        #expect(try eval("length(inputs.obj)") == .int(2))
        #expect(try eval("length(inputs.nothing)") == .int(0))
        #expect(try eval("contains(inputs.name, '.mov')") == true)
        #expect(try eval("contains(inputs.list, 20)") == true)
        #expect(try eval("contains(inputs.list, 21)") == false)
        #expect(try eval("startsWith(inputs.name, 'clip')") == true)
        #expect(try eval("endsWith(inputs.name, '.mp4')") == false)
        #expect(try eval("join(inputs.list, ', ')") == "10, 20, 30")
        #expect(try eval("join(inputs.list)") == "10,20,30")
        #expect(try eval("lower('MiXeD')") == "mixed")
        #expect(try eval("upper('MiXeD')") == "MIXED")
        #expect(try eval("string(inputs.n)") == "42")
        #expect(try eval("string(inputs.obj.nested)") == #"{"deep":true}"#)
        #expect(try eval("default(inputs.nothing, 5)") == .int(5))
        #expect(try eval("default(inputs.n, 5)") == .int(42))
        #expect(try eval("default(inputs.empty, 'x')") == "")  // only null falls back
    }

    @Test("run-time errors carry the location of the offending token")
    func runtimeErrors() throws {
        func failure(_ text: String, in ctx: EvaluationContext = context) -> EvaluationError? {
            let e = try! Expression(parsing: text)
            do throws(EvaluationError) { _ = try e.evaluate(in: ctx); return nil } catch { return error }
        }
        let index = try #require(failure("1 + inputs.n[0]"))
        #expect(index.location.line == 1 && index.location.column == 13)
        #expect(index.message.contains("cannot index an integer"))
        #expect(index.description == "<expression>:1:13: error: \(index.message)")

        let property = try #require(failure("inputs.name.size"))
        #expect(property.location.column == 13)
        #expect(property.message.contains("cannot read property 'size' of a string"))

        #expect(failure("1 / 0")?.message == "division by zero")
        #expect(failure("5 % 0")?.message == "division by zero")
        #expect(failure("1 < 'a'")?.message.contains("cannot compare") == true)
        #expect(failure("inputs.list['a']")?.message.contains("array index must be an integer") == true)
        #expect(failure("secrets.other")?.message == "secret 'other' has no value")
        #expect(failure("format('{1}', 'a')")?.message.contains("placeholder {1}") == true)
        #expect(failure("fromJSON('{bad')")?.message.contains("fromJSON()") == true)
        #expect(failure("upper(1)")?.message.contains("expects a string") == true)
        #expect(failure("9223372036854775807 + 1")?.message.contains("overflow") == true)
        var noItem = context
        noItem.item = nil
        #expect(failure("item", in: noItem)?.message.contains("for_each") == true)
    }

    @Test("syntax errors point into the expression")
    func syntaxErrors() {
        func failure(_ text: String) -> Diagnostic? {
            do { _ = try Expression(parsing: text); return nil } catch { return error }
        }
        #expect(failure("fmt('x')")?.message == "unknown function 'fmt'; did you mean 'format'?")
        #expect(failure("fmt('x')")?.location.column == 1)
        #expect(failure("length(1, 2)")?.message == "length() takes 1 argument, not 2")
        #expect(failure("1 +")?.message.contains("unexpected end of expression") == true)
        #expect(failure("1 +")?.location.column == 4)
        #expect(failure("'open")?.message.contains("unterminated string") == true)
        #expect(failure("a.b")?.message.contains("unknown name 'a'") == true)
        #expect(failure("inputs.x & 1")?.location.column == 10)
        #expect(failure("inputs.x & 1")?.message.contains("use '&&'") == true)
        #expect(failure("(1 + 2")?.message.contains("expected ')'") == true)
        #expect(failure("inputs.list[0")?.message.contains("expected ']'") == true)
        #expect(failure("   ")?.message.contains("empty expression") == true)
        #expect(failure("inputs.")?.message.contains("property name") == true)
        #expect(failure("1 2")?.location.column == 3)
    }

    @Test("referencedSteps finds static step references only once each")
    func referencedSteps() throws {
        let e = try Expression(parsing: "steps.a.outputs.x == steps['b'].status || steps.make-dir.outputs.y || steps.a.status")
        #expect(e.referencedSteps == ["a", "b", "make-dir"])
        #expect(try Expression(parsing: "inputs.a - 1").referencedSteps.isEmpty)
        #expect(try Expression(parsing: "format('{0}', steps.c.outputs)").referencedSteps == ["c"])
    }

    @Test("dashes: part of a name without spaces, subtraction with spaces")
    func dashes() throws {
        #expect(try eval("inputs.n - 2") == .int(40))
        #expect(try eval("inputs.n-2") == .null)  // the property "n-2", which does not exist
    }
}

@Suite("Templates")
struct TemplateTests {
    @Test("a whole-string expression keeps its type")
    func wholeString() throws {
        let t = try Template(parsing: "${{ inputs.n }}")
        guard case .expression = t else { Issue.record("expected .expression, got \(t)"); return }
        #expect(try t.evaluate(in: context) == .int(42))
        #expect(try Template(parsing: "${{ inputs.list }}").evaluate(in: context) == [10, 20, 30])
        #expect(try Template(parsing: "${{ inputs.obj.nested }}").evaluate(in: context) == ["deep": true])
        #expect(!t.isLiteral)
    }

    @Test("interpolation always gives a string")
    func interpolation() throws {
        let t = try Template(parsing: "n=${{ inputs.n }}, list=${{ inputs.list }}, none=${{ inputs.nothing }}.")
        guard case .interpolation(let parts) = t else { Issue.record("expected .interpolation"); return }
        #expect(parts.count == 7)
        #expect(try t.evaluate(in: context) == "n=42, list=[10,20,30], none=null.")
        #expect(try Template(parsing: "${{ inputs.n }}${{ inputs.n }}").evaluate(in: context) == "4242")
    }

    @Test("plain strings are literals")
    func literals() throws {
        let t = try Template(parsing: "just text, $ and { } and $ {{")
        #expect(t.isLiteral)
        #expect(t.literalValue == "just text, $ and { } and $ {{")
    }

    @Test("'}}' inside a quoted string does not end the expression")
    func quotedBraces() throws {
        #expect(try Template(parsing: "${{ format('{0}}}', 1) }}").evaluate(in: context) == "1}")
        #expect(try Template(parsing: "<${{ 'a}}b' }}>").evaluate(in: context) == "<a}}b>")
    }

    @Test("errors: unclosed and empty expressions")
    func errors() {
        do {
            _ = try Template(parsing: "abc ${{ inputs.n")
            Issue.record("unclosed must fail")
        } catch {
            #expect(error.location.column == 5)
            #expect(error.message.contains("unclosed"))
        }
        do {
            _ = try Template(parsing: "x ${{ }}")
            Issue.record("empty must fail")
        } catch {
            #expect(error.message.contains("empty expression"))
        }
    }
}
