import OrchestratePluginKit
import OrchestrateJSON

/// A single PUT or POST of the whole file (WebDAV, S3-style presigned URLs, form-less APIs).
/// Not resumable: a failed attempt starts again from byte 0.
struct PlainUpload {
    let upload: Upload
    let method: String
    let contentType: String

    func run() throws(StepError) -> Upload.Result {
        var headers = ["Content-Type": contentType]
        if let key = upload.step.idempotencyKey { headers["Idempotency-Key"] = key }
        let response = try upload.send(method, upload.url, headers: headers, offset: 0, length: upload.size,
                                       emptyBody: upload.size == 0)
        guard (200..<300).contains(response.status) else {
            throw HTTPErrors.status(response, method: method, url: upload.url)
        }
        return Upload.Result(status: response.status, location: response.header("location"),
                             json: try? JSONValue(parsing: response.body))
    }
}
