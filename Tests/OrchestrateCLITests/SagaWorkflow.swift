import Foundation

extension Harness {
    /// The saga the compensation and interruption tests share: s1, s2, s3 in a chain append
    /// their names to `out` and undo themselves into `undo` ("undo sN", then `undoSuffix(N)`);
    /// `step4` (a line of YAML) follows s3, and `after` (more steps) follows it.
    func sagaWorkflow(step4: String, undoSuffix: (Int) -> String = { _ in "" }, after: String = "") -> String {
        let out = path("out"), undo = path("undo")
        func step(_ n: Int, needs: String) -> String {
            """
              s\(n):
                uses: test.append\(needs)
                with: { file: "\(out)", line: s\(n) }
                compensate:
                  uses: test.append
                  with: { file: "\(undo)", line: "undo s\(n)\(undoSuffix(n))" }
            """
        }
        return workflow("""
            version: 1
            name: saga
            steps:
            \(step(1, needs: ""))
            \(step(2, needs: "\n    needs: [s1]"))
            \(step(3, needs: "\n    needs: [s2]"))
            \(step4)
            \(after)
            """)
    }
}
