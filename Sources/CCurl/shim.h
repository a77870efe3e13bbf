// libcurl for Swift. curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot
// call; these non-variadic wrappers fix the argument type of each kind of option (long,
// curl_off_t, pointer, string, and the callback types the http plugin installs).
#ifndef ORCHESTRATE_CCURL_SHIM_H
#define ORCHESTRATE_CCURL_SHIM_H

// The type-checking macros of typecheck-gcc.h are for direct callers; the wrappers are typed.
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>
#include <sys/socket.h>

static inline CURLcode orc_curl_setopt_long(CURL *handle, CURLoption option, long value) {
    return curl_easy_setopt(handle, option, value);
}

static inline CURLcode orc_curl_setopt_off(CURL *handle, CURLoption option, curl_off_t value) {
    return curl_easy_setopt(handle, option, value);
}

/// Pointers: CURLOPT_*DATA, CURLOPT_HTTPHEADER (a curl_slist), and strings (libcurl copies
/// string options, so the caller's buffer may go away after the call).
static inline CURLcode orc_curl_setopt_pointer(CURL *handle, CURLoption option, const void *value) {
    return curl_easy_setopt(handle, option, value);
}

/// CURLOPT_WRITEFUNCTION, CURLOPT_HEADERFUNCTION.
static inline CURLcode orc_curl_setopt_write_callback(CURL *handle, CURLoption option, curl_write_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

/// CURLOPT_READFUNCTION.
static inline CURLcode orc_curl_setopt_read_callback(CURL *handle, CURLoption option, curl_read_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

/// CURLOPT_SEEKFUNCTION.
static inline CURLcode orc_curl_setopt_seek_callback(CURL *handle, CURLoption option, curl_seek_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

/// CURLOPT_XFERINFOFUNCTION.
static inline CURLcode orc_curl_setopt_xferinfo_callback(CURL *handle, CURLoption option, curl_xferinfo_callback callback) {
    return curl_easy_setopt(handle, option, callback);
}

static inline CURLcode orc_curl_getinfo_long(CURL *handle, CURLINFO info, long *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode orc_curl_getinfo_off(CURL *handle, CURLINFO info, curl_off_t *value) {
    return curl_easy_getinfo(handle, info, value);
}

static inline CURLcode orc_curl_getinfo_string(CURL *handle, CURLINFO info, const char **value) {
    return curl_easy_getinfo(handle, info, value);
}

/// Makes every socket of `handle` end with a reset instead of an orderly close (SO_LINGER 0):
/// bytes still in the kernel's send buffer when the transfer is abandoned are dropped, not
/// delivered later. A node cut off from the network that gave its run up must not have the
/// rest of an old request reach the server once the network is back, after another node has
/// continued the upload. A finished request loses nothing: its answer came after its body.
static inline int orc_curl_linger_zero(void *clientp, curl_socket_t fd, curlsocktype purpose) {
    (void)clientp;
    (void)purpose;
    struct linger off = {1, 0};
    setsockopt(fd, SOL_SOCKET, SO_LINGER, &off, sizeof off);
    return CURL_SOCKOPT_OK;
}

static inline CURLcode orc_curl_reset_on_close(CURL *handle) {
    return curl_easy_setopt(handle, CURLOPT_SOCKOPTFUNCTION, orc_curl_linger_zero);
}

#endif
