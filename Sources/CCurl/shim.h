// libcurl for Swift. curl_easy_setopt and curl_easy_getinfo are variadic, which Swift cannot
// call; these non-variadic wrappers fix the argument type of each kind of option (long,
// curl_off_t, pointer, string, and the callback types the http plugin installs).
#ifndef ORCHESTRATE_CCURL_SHIM_H
#define ORCHESTRATE_CCURL_SHIM_H

// The type-checking macros of typecheck-gcc.h are for direct callers; the wrappers are typed.
#define CURL_DISABLE_TYPECHECK 1
#include <curl/curl.h>

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

#endif
