/*
 * teststeps.c — the "test" plugin: small, predictable steps for the host and engine tests.
 *
 * Built by the tests with CCompiler.buildFixture("teststeps", ...) exactly like a third-party
 * plugin (cc -shared -fPIC -std=c99 -Wall -Werror, the ABI header only). Every step reads its
 * inputs from the flat inputs JSON object with the two helpers below (json_string, json_int):
 * enough for tests, not a JSON parser to copy into a real plugin.
 *
 *   test.noop        returns OK at once.
 *   test.append      {file, line}: appends line + "\n" to file (O_APPEND, fsync); output `line`.
 *   test.flaky       {counter_file, fail_times, kind?, retry_after_ms?, code?}: counts attempts
 *                    in counter_file; fails (kind, default "retryable") while the count is
 *                    <= fail_times; then outputs `attempts` = the count.
 *   test.sleep       {ms, gauge_file?, marker?}: sleeps ms in 10 ms slices, stopping with
 *                    CANCELLED when cancelled. With gauge_file, keeps "current max" of the
 *                    number of test.sleep calls running at once in that file (under flock).
 *                    Output `slept_ms`.
 *   test.checkpoint  {file, count, delay_ms?}: resumes at the checkpoint n (decimal text), for
 *                    i in n..<count appends "i\n" to file and saves checkpoint i+1; output
 *                    `resumed_from` = n.
 *   test.fail        {kind, message, code?}: always fails with that kind. kind is a name
 *                    ("retryable", "permanent", "invalid-input", "timeout", "cancelled"), an
 *                    integer (passed to set_error as is), or "none" (fails without set_error).
 *   test.echo        any inputs; outputs `with` (the inputs JSON), `idempotency_key` (string or
 *                    null) and `attempt`.
 *   test.items       {file, item_ms?}: ORC_STEP_ACCEPTS_ITEMS; appends each item's JSON + "\n"
 *                    to file and reports it done, until the session closes; output `count`.
 *                    With item_ms, each item first "moves" 1 MB over that many milliseconds,
 *                    reporting per-file progress 20 times a second.
 *   test.metered     {bytes, chunk?}: "moves" bytes in chunks (default 64 KiB) through the
 *                    orchestrate.bandwidth.v1 extension, as a network step would; outputs
 *                    `bytes` and `extension` (whether the host offered it).
 *   test.typed       {file, count = 3 (integer >= 1), label = "plain"}: appends
 *                    "LABEL COUNT\n" to file; outputs `with` (the inputs JSON as received). It
 *                    fills no default itself (a missing count or label fails it): what it sees
 *                    of them is what the host filled in from its schema.
 */
#include <orchestrate/plugin.h>

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <unistd.h>

/* ---------------------------------------------------------------------------------------------
 * Flat JSON helpers: find a top-level key of an object, read it as a string or an integer.
 * ------------------------------------------------------------------------------------------- */

static const char *skip_ws(const char *p) {
    while (*p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
    return p;
}

/* p points at '"'; returns the character after the closing quote (or at the NUL). */
static const char *skip_string(const char *p) {
    p++;
    while (*p && *p != '"') p += (*p == '\\' && p[1]) ? 2 : 1;
    return *p ? p + 1 : p;
}

/* Skips one JSON value of any type; returns the character after it. */
static const char *skip_value(const char *p) {
    int depth = 0;
    p = skip_ws(p);
    while (*p) {
        char c = *p;
        if (c == '"') {
            p = skip_string(p);
            if (depth == 0) return p;
            continue;
        }
        if (c == '{' || c == '[') depth++;
        else if (c == '}' || c == ']') {
            if (depth == 0) return p; /* the end of the enclosing object: the value was empty */
            if (--depth == 0) return p + 1;
        } else if (depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r')) {
            return p;
        }
        p++;
    }
    return p;
}

/* Decodes the JSON string at p (pointing at '"') into out; returns 0 if it does not fit. */
static int decode_string(const char *p, char *out, size_t cap) {
    size_t n = 0;
    if (*p != '"') return 0;
    p++;
    while (*p && *p != '"') {
        unsigned long c = (unsigned char)*p++;
        if (c == '\\') {
            char e = *p++;
            switch (e) {
            case 'n': c = '\n'; break;
            case 't': c = '\t'; break;
            case 'r': c = '\r'; break;
            case 'b': c = '\b'; break;
            case 'f': c = '\f'; break;
            case 'u': {
                char hex[5] = {0};
                memcpy(hex, p, 4);
                p += 4;
                c = strtoul(hex, NULL, 16);
                if (c >= 0xD800 && c <= 0xDBFF && p[0] == '\\' && p[1] == 'u') {
                    memcpy(hex, p + 2, 4);
                    p += 6;
                    c = 0x10000 + ((c - 0xD800) << 10) + (strtoul(hex, NULL, 16) - 0xDC00);
                }
                break;
            }
            default: c = (unsigned char)e; break;
            }
            /* UTF-8 encode code points from \u escapes. */
            if (c >= 0x80) {
                unsigned char buf[4];
                size_t len;
                if (c < 0x800) { buf[0] = 0xC0 | (c >> 6); buf[1] = 0x80 | (c & 0x3F); len = 2; }
                else if (c < 0x10000) {
                    buf[0] = 0xE0 | (c >> 12); buf[1] = 0x80 | ((c >> 6) & 0x3F);
                    buf[2] = 0x80 | (c & 0x3F); len = 3;
                } else {
                    buf[0] = 0xF0 | (c >> 18); buf[1] = 0x80 | ((c >> 12) & 0x3F);
                    buf[2] = 0x80 | ((c >> 6) & 0x3F); buf[3] = 0x80 | (c & 0x3F); len = 4;
                }
                if (n + len >= cap) return 0;
                memcpy(out + n, buf, len);
                n += len;
                continue;
            }
        }
        if (n + 1 >= cap) return 0;
        out[n++] = (char)c;
    }
    out[n] = '\0';
    return 1;
}

/* Returns the value of top-level key `key` in the JSON object `json`, or NULL. */
static const char *json_find(const char *json, const char *key) {
    char name[256];
    const char *p = skip_ws(json);
    if (*p != '{') return NULL;
    p++;
    for (;;) {
        p = skip_ws(p);
        if (*p != '"') return NULL;
        if (!decode_string(p, name, sizeof name)) name[0] = '\0';
        p = skip_ws(skip_string(p));
        if (*p != ':') return NULL;
        p = skip_ws(p + 1);
        if (strcmp(name, key) == 0) return p;
        p = skip_ws(skip_value(p));
        if (*p != ',') return NULL;
        p++;
    }
}

/* Copies the string value of `key` into out; returns 1, or 0 if missing, not a string or too long. */
static int json_string(const char *json, const char *key, char *out, size_t cap) {
    const char *v = json_find(json, key);
    return v && *v == '"' && decode_string(v, out, cap);
}

/* Reads the integer value of `key`; returns 1, or 0 if missing or not a number. */
static int json_int(const char *json, const char *key, long long *out) {
    const char *v = json_find(json, key);
    char *end;
    if (!v || !(*v == '-' || (*v >= '0' && *v <= '9'))) return 0;
    *out = strtoll(v, &end, 10);
    return end != v;
}

/* Writes s as a JSON string literal into out. */
static void json_quote(const char *s, char *out, size_t cap) {
    size_t n = 0;
    out[n++] = '"';
    for (; *s && n + 8 < cap; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') { out[n++] = '\\'; out[n++] = (char)c; }
        else if (c == '\n') { out[n++] = '\\'; out[n++] = 'n'; }
        else if (c < 0x20) n += (size_t)snprintf(out + n, cap - n, "\\u%04x", c);
        else out[n++] = (char)c;
    }
    out[n++] = '"';
    out[n] = '\0';
}

/* ---------------------------------------------------------------------------------------------
 * Small helpers shared by the steps
 * ------------------------------------------------------------------------------------------- */

static int32_t fail(const orc_host_api *api, orc_host *host, int32_t kind, const char *code,
                    const char *message) {
    api->set_error(host, kind, code, message, -1);
    return ORC_RUN_FAILED;
}

static int32_t missing(const orc_host_api *api, orc_host *host, const char *key) {
    char message[300];
    snprintf(message, sizeof message, "input '%s' is missing or has the wrong type", key);
    return fail(api, host, ORC_ERROR_INVALID_INPUT, "missing_input", message);
}

static int32_t kind_from_name(const char *name) {
    if (strcmp(name, "retryable") == 0) return ORC_ERROR_RETRYABLE;
    if (strcmp(name, "permanent") == 0) return ORC_ERROR_PERMANENT;
    if (strcmp(name, "invalid-input") == 0) return ORC_ERROR_INVALID_INPUT;
    if (strcmp(name, "timeout") == 0) return ORC_ERROR_TIMEOUT;
    if (strcmp(name, "cancelled") == 0) return ORC_ERROR_CANCELLED;
    return (int32_t)atoi(name); /* "7" → 7 (an unknown kind); other names → 0 (unknown) */
}

/* Appends len bytes to path with O_APPEND and fsync; returns 0 or -1. */
static int append_file(const char *path, const char *data, size_t len) {
    int fd = open(path, O_WRONLY | O_CREAT | O_APPEND, 0644);
    if (fd < 0) return -1;
    int ok = write(fd, data, len) == (ssize_t)len && fsync(fd) == 0;
    close(fd);
    return ok ? 0 : -1;
}

static int32_t io_failure(const orc_host_api *api, orc_host *host, const char *what, const char *path) {
    char message[4200];
    snprintf(message, sizeof message, "%s %s: %s", what, path, strerror(errno));
    return fail(api, host, ORC_ERROR_PERMANENT, "io_error", message);
}

#define OBJECT_SCHEMA(props, required) \
    "{\"type\":\"object\",\"properties\":{" props "},\"required\":[" required "]}"

/* ---------------------------------------------------------------------------------------------
 * Steps
 * ------------------------------------------------------------------------------------------- */

static int32_t run_noop(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    (void)call; (void)api; (void)host;
    return ORC_RUN_OK;
}

static int32_t run_append(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    char file[4096], line[4096], quoted[8400];
    if (!json_string(call->inputs_json, "file", file, sizeof file)) return missing(api, host, "file");
    if (!json_string(call->inputs_json, "line", line, sizeof line)) return missing(api, host, "line");
    size_t len = strlen(line);
    line[len] = '\n';
    if (append_file(file, line, len + 1) != 0) return io_failure(api, host, "cannot append to", file);
    line[len] = '\0';
    json_quote(line, quoted, sizeof quoted);
    api->set_output(host, "line", quoted);
    return ORC_RUN_OK;
}

static int32_t run_flaky(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    char counter_file[4096], kind_name[64] = "retryable", code[256], text[64], message[128];
    long long fail_times, retry_after_ms = -1, count = 0;
    if (!json_string(call->inputs_json, "counter_file", counter_file, sizeof counter_file))
        return missing(api, host, "counter_file");
    if (!json_int(call->inputs_json, "fail_times", &fail_times)) return missing(api, host, "fail_times");
    json_string(call->inputs_json, "kind", kind_name, sizeof kind_name);
    json_int(call->inputs_json, "retry_after_ms", &retry_after_ms);
    int has_code = json_string(call->inputs_json, "code", code, sizeof code);

    int fd = open(counter_file, O_RDWR | O_CREAT, 0644);
    if (fd < 0) return io_failure(api, host, "cannot open", counter_file);
    ssize_t n = read(fd, text, sizeof text - 1);
    text[n > 0 ? n : 0] = '\0';
    count = atoll(text) + 1;
    int len = snprintf(text, sizeof text, "%lld\n", count);
    int ok = ftruncate(fd, 0) == 0 && pwrite(fd, text, (size_t)len, 0) == len && fsync(fd) == 0;
    close(fd);
    if (!ok) return io_failure(api, host, "cannot write", counter_file);

    if (count <= fail_times) {
        snprintf(message, sizeof message, "failing on purpose (attempt %lld)", count);
        api->set_error(host, kind_from_name(kind_name), has_code ? code : NULL, message, retry_after_ms);
        return ORC_RUN_FAILED;
    }
    snprintf(text, sizeof text, "%lld", count);
    api->set_output(host, "attempts", text);
    return ORC_RUN_OK;
}

/* Adds delta to "current max" in the gauge file, under an exclusive flock. */
static int gauge_add(const char *path, int delta) {
    char text[64];
    int current = 0, max = 0;
    int fd = open(path, O_RDWR | O_CREAT, 0644);
    if (fd < 0) return -1;
    if (flock(fd, LOCK_EX) != 0) { close(fd); return -1; }
    ssize_t n = pread(fd, text, sizeof text - 1, 0);
    text[n > 0 ? n : 0] = '\0';
    if (sscanf(text, "%d %d", &current, &max) != 2) current = max = 0;
    current += delta;
    if (current > max) max = current;
    int len = snprintf(text, sizeof text, "%d %d\n", current, max);
    int ok = ftruncate(fd, 0) == 0 && pwrite(fd, text, (size_t)len, 0) == len && fsync(fd) == 0;
    flock(fd, LOCK_UN);
    close(fd);
    return ok ? 0 : -1;
}

static int32_t run_sleep(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    char gauge[4096], text[32];
    long long ms, slept = 0;
    if (!json_int(call->inputs_json, "ms", &ms)) return missing(api, host, "ms");
    int has_gauge = json_string(call->inputs_json, "gauge_file", gauge, sizeof gauge);
    if (has_gauge && gauge_add(gauge, +1) != 0) return io_failure(api, host, "cannot update", gauge);
    int cancelled = 0;
    while (slept < ms) {
        long long slice = ms - slept < 10 ? ms - slept : 10;
        if (api->sleep_ms(host, slice) || api->is_cancelled(host)) { cancelled = 1; break; }
        slept += slice;
    }
    if (has_gauge) gauge_add(gauge, -1);
    if (cancelled) return fail(api, host, ORC_ERROR_CANCELLED, "cancelled", "test.sleep was cancelled");
    snprintf(text, sizeof text, "%lld", slept);
    api->set_output(host, "slept_ms", text);
    return ORC_RUN_OK;
}

static int32_t run_checkpoint(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    char file[4096], text[32];
    long long count, delay_ms = 50, start = 0;
    if (!json_string(call->inputs_json, "file", file, sizeof file)) return missing(api, host, "file");
    if (!json_int(call->inputs_json, "count", &count)) return missing(api, host, "count");
    json_int(call->inputs_json, "delay_ms", &delay_ms);
    size_t size = 0;
    const uint8_t *saved = api->load_checkpoint(host, &size);
    if (saved && size < sizeof text) {
        memcpy(text, saved, size);
        text[size] = '\0';
        start = atoll(text);
    }
    for (long long i = start; i < count; i++) {
        int len = snprintf(text, sizeof text, "%lld\n", i);
        if (append_file(file, text, (size_t)len) != 0) return io_failure(api, host, "cannot append to", file);
        len = snprintf(text, sizeof text, "%lld", i + 1);
        api->save_checkpoint(host, (const uint8_t *)text, (size_t)len);
        if (api->sleep_ms(host, delay_ms) || api->is_cancelled(host))
            return fail(api, host, ORC_ERROR_CANCELLED, "cancelled", "test.checkpoint was cancelled");
    }
    snprintf(text, sizeof text, "%lld", start);
    api->set_output(host, "resumed_from", text);
    return ORC_RUN_OK;
}

static int32_t run_fail(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    char kind_name[64], message[1024], code[256];
    long long kind_number;
    int32_t kind;
    if (json_string(call->inputs_json, "kind", kind_name, sizeof kind_name)) {
        if (strcmp(kind_name, "none") == 0) return ORC_RUN_FAILED;
        kind = kind_from_name(kind_name);
    } else if (json_int(call->inputs_json, "kind", &kind_number)) {
        kind = (int32_t)kind_number;
    } else {
        return missing(api, host, "kind");
    }
    if (!json_string(call->inputs_json, "message", message, sizeof message)) return missing(api, host, "message");
    int has_code = json_string(call->inputs_json, "code", code, sizeof code);
    api->set_error(host, kind, has_code ? code : NULL, message, -1);
    return ORC_RUN_FAILED;
}

static int32_t run_echo(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    char text[4200];
    api->set_output(host, "with", call->inputs_json);
    if (call->idempotency_key) {
        json_quote(call->idempotency_key, text, sizeof text);
        api->set_output(host, "idempotency_key", text);
    } else {
        api->set_output(host, "idempotency_key", "null");
    }
    snprintf(text, sizeof text, "%u", (unsigned)call->attempt);
    api->set_output(host, "attempt", text);
    return ORC_RUN_OK;
}

static int32_t run_items(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    char file[4096], text[32];
    long long count = 0;
    long long item_ms = 0;
    if (!json_string(call->inputs_json, "file", file, sizeof file)) return missing(api, host, "file");
    json_int(call->inputs_json, "item_ms", &item_ms);
    for (;;) {
        orc_item item;
        memset(&item, 0, sizeof item);
        item.struct_size = sizeof item;
        int32_t got = api->next_item(host, 200, &item);
        if (got == ORC_ITEM_CLOSED) break;
        if (got == ORC_ITEM_TIMEOUT) {
            if (api->is_cancelled(host))
                return fail(api, host, ORC_ERROR_CANCELLED, "cancelled", "test.items was cancelled");
            continue;
        }
        long long ticks = item_ms / 50;
        for (long long i = 1; i <= ticks; i++) {
            if (api->sleep_ms(host, 50) || api->is_cancelled(host))
                return fail(api, host, ORC_ERROR_CANCELLED, "cancelled", "test.items was cancelled");
            api->item_progress(host, item.id, 1000000 * i / ticks, 1000000);
        }
        size_t len = strlen(item.json);
        char *line = malloc(len + 1);
        if (!line) return fail(api, host, ORC_ERROR_RETRYABLE, "ENOMEM", "out of memory");
        memcpy(line, item.json, len);
        line[len] = '\n';
        int written = append_file(file, line, len + 1);
        free(line);
        if (written != 0) {
            api->item_done(host, item.id, 0, "cannot append to the file");
            continue;
        }
        api->item_done(host, item.id, 1, NULL);
        count++;
    }
    snprintf(text, sizeof text, "%lld", count);
    api->set_output(host, "count", text);
    return ORC_RUN_OK;
}

static int32_t run_metered(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    long long bytes, chunk = 65536, done = 0;
    char text[32];
    if (!json_int(call->inputs_json, "bytes", &bytes)) return missing(api, host, "bytes");
    json_int(call->inputs_json, "chunk", &chunk);
    if (chunk < 1) chunk = 1;
    const orc_bandwidth_v1 *bandwidth =
        ORC_API_HAS(api, get_extension) ? api->get_extension(host, ORC_EXT_BANDWIDTH_V1) : NULL;
    if (bandwidth && !ORC_STRUCT_HAS(orc_bandwidth_v1, bandwidth, consume)) bandwidth = NULL;
    while (done < bytes) {
        long long n = bytes - done < chunk ? bytes - done : chunk;
        if ((bandwidth && bandwidth->consume(host, n) != 0) || api->is_cancelled(host))
            return fail(api, host, ORC_ERROR_CANCELLED, "cancelled", "test.metered was cancelled");
        done += n;
        api->progress(host, done, bytes, -1, -1);
    }
    snprintf(text, sizeof text, "%lld", done);
    api->set_output(host, "bytes", text);
    api->set_output(host, "extension", bandwidth ? "true" : "false");
    return ORC_RUN_OK;
}

static int32_t run_typed(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    char file[4096], label[256], line[400];
    long long count;
    if (!json_string(call->inputs_json, "file", file, sizeof file)) return missing(api, host, "file");
    if (!json_int(call->inputs_json, "count", &count)) return missing(api, host, "count");
    if (!json_string(call->inputs_json, "label", label, sizeof label)) return missing(api, host, "label");
    int len = snprintf(line, sizeof line, "%s %lld\n", label, count);
    if (append_file(file, line, (size_t)len) != 0) return io_failure(api, host, "cannot append to", file);
    api->set_output(host, "with", call->inputs_json);
    return ORC_RUN_OK;
}

/* ---------------------------------------------------------------------------------------------
 * The description
 * ------------------------------------------------------------------------------------------- */

#define STEP(name, ident, flag, summary_text, input, output, fn)                            \
    static const orc_step_type name = {                                                      \
        sizeof(orc_step_type), flag, ident, "1.0.0", summary_text, NULL, input, output, fn \
    }

STEP(noop, "test.noop", 0, "Does nothing and succeeds.", "{\"type\":\"object\"}", NULL, run_noop);
STEP(append, "test.append", 0, "Appends a line to a file.",
     OBJECT_SCHEMA("\"file\":{\"type\":\"string\"},\"line\":{\"type\":\"string\"}", "\"file\",\"line\""),
     OBJECT_SCHEMA("\"line\":{\"type\":\"string\"}", "\"line\""), run_append);
STEP(flaky, "test.flaky", 0, "Fails a given number of times, then succeeds.",
     OBJECT_SCHEMA("\"counter_file\":{\"type\":\"string\"},\"fail_times\":{\"type\":\"integer\"},"
                   "\"kind\":{\"type\":\"string\",\"enum\":[\"retryable\",\"permanent\",\"invalid-input\",\"timeout\"]},"
                   "\"retry_after_ms\":{\"type\":\"integer\"},\"code\":{\"type\":\"string\"}",
                   "\"counter_file\",\"fail_times\""),
     OBJECT_SCHEMA("\"attempts\":{\"type\":\"integer\"}", "\"attempts\""), run_flaky);
STEP(sleep_step, "test.sleep", 0, "Sleeps, honouring cancellation; can gauge concurrency.",
     OBJECT_SCHEMA("\"ms\":{\"type\":\"integer\",\"minimum\":0},\"gauge_file\":{\"type\":\"string\"},"
                   "\"marker\":{\"type\":\"string\"}", "\"ms\""),
     OBJECT_SCHEMA("\"slept_ms\":{\"type\":\"integer\"}", "\"slept_ms\""), run_sleep);
STEP(checkpoint, "test.checkpoint", 0, "Counts to a number, checkpointing each step.",
     OBJECT_SCHEMA("\"file\":{\"type\":\"string\"},\"count\":{\"type\":\"integer\"},\"delay_ms\":{\"type\":\"integer\"}",
                   "\"file\",\"count\""),
     OBJECT_SCHEMA("\"resumed_from\":{\"type\":\"integer\"}", "\"resumed_from\""), run_checkpoint);
STEP(fail_step, "test.fail", 0, "Always fails with the given error kind.",
     OBJECT_SCHEMA("\"kind\":{\"description\":\"error kind name, an integer, or none\"},"
                   "\"message\":{\"type\":\"string\"},\"code\":{\"type\":\"string\"}", "\"kind\",\"message\""),
     NULL, run_fail);
STEP(echo, "test.echo", 0, "Outputs its inputs, idempotency key and attempt.", "{\"type\":\"object\"}",
     "{\"type\":\"object\",\"properties\":{\"with\":{\"type\":\"object\"},\"attempt\":{\"type\":\"integer\"},"
     "\"idempotency_key\":{\"type\":[\"string\",\"null\"]}}}",
     run_echo);
STEP(items, "test.items", ORC_STEP_ACCEPTS_ITEMS, "Appends every item it is given to a file.",
     OBJECT_SCHEMA("\"file\":{\"type\":\"string\"},\"item_ms\":{\"type\":\"integer\"}", "\"file\""),
     OBJECT_SCHEMA("\"count\":{\"type\":\"integer\"}", "\"count\""), run_items);

STEP(metered, "test.metered", 0, "Moves bytes through the bandwidth extension, as a transfer would.",
     OBJECT_SCHEMA("\"bytes\":{\"type\":\"integer\",\"minimum\":0},\"chunk\":{\"type\":\"integer\",\"minimum\":1}", "\"bytes\""),
     OBJECT_SCHEMA("\"bytes\":{\"type\":\"integer\"},\"extension\":{\"type\":\"boolean\"}", "\"bytes\""), run_metered);

STEP(typed, "test.typed", 0, "Appends its label and count to a file; its schema has defaults.",
     "{\"type\":\"object\",\"additionalProperties\":false,\"required\":[\"file\"],\"properties\":{"
     "\"file\":{\"type\":\"string\"},"
     "\"count\":{\"type\":\"integer\",\"minimum\":1,\"default\":3},"
     "\"label\":{\"type\":\"string\",\"default\":\"plain\"}}}",
     "{\"type\":\"object\",\"properties\":{\"with\":{\"type\":\"object\"}}}", run_typed);

static const orc_step_type *const steps[] = {
    &noop, &append, &flaky, &sleep_step, &checkpoint, &fail_step, &echo, &items, &metered, &typed,
};

static const orc_plugin plugin = {
    sizeof(orc_plugin), ORC_ABI_VERSION_MAJOR, ORC_ABI_VERSION_MINOR,
    sizeof steps / sizeof steps[0],
    "test", "1.0.0", "Predictable steps for orchestrate's own tests.", steps,
};

ORC_EXPORT const orc_plugin *orchestrate_plugin_entry_v1(void) { return &plugin; }
