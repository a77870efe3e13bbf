/* Test plugin "network", built by the engine tests with cc:
 *
 *   test.connect  {host, port, log}: opens a TCP connection to host:port and closes it, appending
 *                 "connected" to log. Refused or unreachable: fails retryable with the code
 *                 "unreachable" (the host convention for "the remote end cannot be reached").
 */
#include <orchestrate/plugin.h>
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static int json_string(const char *json, const char *key, char *out, size_t size) {
    char pattern[128];
    snprintf(pattern, sizeof pattern, "\"%s\":\"", key);
    const char *p = strstr(json, pattern);
    if (!p) return 0;
    p += strlen(pattern);
    size_t n = 0;
    while (p[n] && p[n] != '"' && n + 1 < size) { out[n] = p[n]; n++; }
    out[n] = 0;
    return 1;
}

static long json_int(const char *json, const char *key) {
    char pattern[128];
    snprintf(pattern, sizeof pattern, "\"%s\":", key);
    const char *p = strstr(json, pattern);
    long value;
    return p && sscanf(p + strlen(pattern), "%ld", &value) == 1 ? value : -1;
}

static int32_t run_connect(const orc_step_call *call, const orc_host_api *api, orc_host *host) {
    char address[64], log[1024];
    long port = json_int(call->inputs_json, "port");
    if (!json_string(call->inputs_json, "host", address, sizeof address) || !json_string(call->inputs_json, "log", log, sizeof log) || port <= 0) {
        api->set_error(host, ORC_ERROR_INVALID_INPUT, "input", "host, port and log are required", -1);
        return ORC_RUN_FAILED;
    }
    struct sockaddr_in to;
    memset(&to, 0, sizeof to);
    to.sin_family = AF_INET;
    to.sin_port = htons((unsigned short)port);
    inet_pton(AF_INET, address, &to.sin_addr);
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    int ok = fd >= 0 && connect(fd, (struct sockaddr *)&to, sizeof to) == 0;
    if (fd >= 0) close(fd);
    if (!ok) {
        api->set_error(host, ORC_ERROR_RETRYABLE, "unreachable", "connection refused", -1);
        return ORC_RUN_FAILED;
    }
    FILE *f = fopen(log, "a");
    if (f) {
        fputs("connected\n", f);
        fclose(f);
    }
    return ORC_RUN_OK;
}

static const orc_step_type connect_step = {sizeof(orc_step_type), 0, "test.connect", "1.0.0",
                                           "Connects to host:port once.", NULL, "{\"type\":\"object\"}", NULL,
                                           run_connect, NULL};
static const orc_step_type *const steps[] = {&connect_step};
static const orc_plugin plugin = {sizeof(orc_plugin), ORC_ABI_VERSION_MAJOR, ORC_ABI_VERSION_MINOR, 1,
                                  "network", "1.0.0", "Network steps for tests.", steps};

ORC_EXPORT const orc_plugin *orchestrate_plugin_entry_v1(void) { return &plugin; }
