import Hummingbird
import HTTPTypes
import NIOCore

/// The web dashboard: static HTML, CSS and JavaScript (Sources/OrchestrateHTTPAPI/Dashboard,
/// compiled into the binary by SwiftPM's `embedInCode`: no build step, no files to install
/// beside `orchestrate`, nothing fetched from a CDN). The page reads everything through the
/// JSON API with the bearer token, so these files hold no data and are served without one
/// (`BearerAuthMiddleware` lets exactly these paths through).
enum DashboardRoutes {
    struct Asset {
        let bytes: [UInt8]
        let contentType: String
    }

    /// URL path → file. `/` is the page; the rest are what it loads.
    static let assets: [String: Asset] = [
        "/": Asset(bytes: PackageResources.index_html, contentType: "text/html; charset=utf-8"),
        "/ui/dashboard.css": Asset(bytes: PackageResources.dashboard_css, contentType: "text/css; charset=utf-8"),
        "/ui/app.js": Asset(bytes: PackageResources.app_js, contentType: "text/javascript; charset=utf-8"),
        "/ui/api.js": Asset(bytes: PackageResources.api_js, contentType: "text/javascript; charset=utf-8"),
        "/ui/dom.js": Asset(bytes: PackageResources.dom_js, contentType: "text/javascript; charset=utf-8"),
        "/ui/overview.js": Asset(bytes: PackageResources.overview_js, contentType: "text/javascript; charset=utf-8"),
        "/ui/runs.js": Asset(bytes: PackageResources.runs_js, contentType: "text/javascript; charset=utf-8"),
        "/ui/run.js": Asset(bytes: PackageResources.run_js, contentType: "text/javascript; charset=utf-8"),
        "/ui/queues.js": Asset(bytes: PackageResources.queues_js, contentType: "text/javascript; charset=utf-8"),
        "/ui/nodes.js": Asset(bytes: PackageResources.nodes_js, contentType: "text/javascript; charset=utf-8"),
        "/ui/schedules.js": Asset(bytes: PackageResources.schedules_js, contentType: "text/javascript; charset=utf-8"),
        "/ui/plugins.js": Asset(bytes: PackageResources.plugins_js, contentType: "text/javascript; charset=utf-8"),
        "/ui/favicon.svg": Asset(bytes: PackageResources.favicon_svg, contentType: "image/svg+xml"),
    ]

    /// Whether `request` asks for a dashboard file (served without a token).
    static func isAsset(_ request: Request) -> Bool {
        (request.method == .get || request.method == .head) && assets[request.uri.path] != nil
    }

    /// Scripts and styles only from this origin, never inline (a label that slipped into the
    /// DOM as markup still could not run); no framing (clickjacking a Cancel button); no
    /// referrer (the first URL carries the token); no MIME sniffing.
    static let contentSecurityPolicy = "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; "
        + "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"

    static func add(to router: Router<APIContext>) {
        for (path, asset) in assets {
            router.get(RouterPath(path)) { _, _ in response(asset) }
        }
    }

    static func response(_ asset: Asset) -> Response {
        var headers = HTTPFields()
        headers[.contentType] = asset.contentType
        headers[.contentSecurityPolicy] = contentSecurityPolicy
        headers[.xContentTypeOptions] = "nosniff"
        headers[.referrerPolicy] = "no-referrer"
        headers[.xFrameOptions] = "DENY"  // frame-ancestors for browsers that predate it
        headers[.cacheControl] = "no-cache"  // revalidate: a new binary brings new files
        return Response(status: .ok, headers: headers, body: .init(byteBuffer: ByteBuffer(bytes: asset.bytes)))
    }
}

extension HTTPField.Name {
    static let referrerPolicy = HTTPField.Name("Referrer-Policy")!
    static let xFrameOptions = HTTPField.Name("X-Frame-Options")!
}
