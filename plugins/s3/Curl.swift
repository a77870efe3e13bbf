import CCurl

/// libcurl's option and info calls through the typed wrappers of the CCurl shim (Swift cannot
/// call the variadic curl_easy_setopt/getinfo). The s3 plugin's own, since plugins share no code
/// but the kit; it needs only these.
enum Curl {
    typealias Handle = UnsafeMutableRawPointer

    /// curl_global_init is not thread-safe: done once, before the first handle.
    private static let initialised: Bool = {
        curl_global_init(Int(CURL_GLOBAL_DEFAULT))
        return true
    }()

    static func ensureInitialised() { _ = initialised }

    static func set(_ handle: Handle, _ option: CURLoption, _ value: Int) {
        if Int(option.rawValue) >= Int(CURLOPTTYPE_OFF_T) && Int(option.rawValue) < Int(CURLOPTTYPE_BLOB) {
            _ = orc_curl_setopt_off(handle, option, curl_off_t(value))
        } else {
            _ = orc_curl_setopt_long(handle, option, value)
        }
    }

    static func set(_ handle: Handle, _ option: CURLoption, _ value: Bool) { set(handle, option, value ? 1 : 0) }

    static func set(_ handle: Handle, _ option: CURLoption, pointer: UnsafeRawPointer?) {
        _ = orc_curl_setopt_pointer(handle, option, pointer)
    }

    /// libcurl copies string options: a temporary is fine.
    static func set(_ handle: Handle, _ option: CURLoption, _ value: String) {
        value.withCString { _ = orc_curl_setopt_pointer(handle, option, $0) }
    }

    static func set(_ handle: Handle, _ option: CURLoption, write callback: curl_write_callback) {
        _ = orc_curl_setopt_write_callback(handle, option, callback)
    }

    static func set(_ handle: Handle, _ option: CURLoption, read callback: curl_read_callback) {
        _ = orc_curl_setopt_read_callback(handle, option, callback)
    }

    static func set(_ handle: Handle, _ option: CURLoption, seek callback: curl_seek_callback) {
        _ = orc_curl_setopt_seek_callback(handle, option, callback)
    }

    static func set(_ handle: Handle, _ option: CURLoption, xferinfo callback: curl_xferinfo_callback) {
        _ = orc_curl_setopt_xferinfo_callback(handle, option, callback)
    }

    static func infoInt(_ handle: Handle, _ info: CURLINFO) -> Int {
        var value = 0
        _ = orc_curl_getinfo_long(handle, info, &value)
        return value
    }

    static func describe(_ code: CURLcode) -> String { String(cString: curl_easy_strerror(code)) }
}
