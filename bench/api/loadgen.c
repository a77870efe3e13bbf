/* The load generator of bench/api: SSE followers and paced API requests against one `serve`,
 * in one thread on epoll, so that the measuring tool takes as little as possible of the cores
 * the runs under test share with it (the Python generator it replaces took 0.12-0.19 of the
 * two cores by itself, most of it reading the followers' 100 MB/s).
 *
 *   cc -O2 -o loadgen loadgen.c
 *   loadgen PORT TOKEN MIX SSE_CLIENTS RATE CONNECTIONS PER_REQUEST
 *
 * MIX is all | sse | detail | list | metrics | small (what bench.py's --mix means). Requests go
 * over CONNECTIONS kept-alive connections (PER_REQUEST=1: a new connection for each). It runs
 * until SIGTERM, then prints one JSON line: events per follower, request latencies (from when a
 * request was due to its answer, waiting for a connection included), counts and its own CPU. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { MAX_IN_FLIGHT = 256, MAX_IDS = 64, ID_LEN = 64, MAX_LATENCIES = 1 << 20 };

static const char *LIST_PATH = "/api/runs?limit=50";
static const char *ALL_PATHS[] = {"/api/runs?limit=50", "/api/queues", "/api/nodes", "/metrics", "/api/runs?status=running"};
static const char *LIST_PATHS[] = {"/api/runs?limit=50", "/api/runs?status=running"};
static const char *SMALL_PATHS[] = {"/api/queues", "/api/nodes"};
static const char *METRICS_PATHS[] = {"/metrics"};

static volatile sig_atomic_t stopping = 0;
static void on_term(int sig) { (void)sig; stopping = 1; }

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t.tv_sec + t.tv_nsec / 1e9;
}

/* A growable byte buffer: what a connection has received and not yet consumed. */
struct buffer { char *bytes; size_t length, capacity; };

static void append(struct buffer *b, const char *data, size_t n) {
    if (b->length + n + 1 > b->capacity) {
        b->capacity = (b->length + n + 1) * 2;
        b->bytes = realloc(b->bytes, b->capacity);
        if (!b->bytes) { perror("realloc"); exit(1); }
    }
    memcpy(b->bytes + b->length, data, n);
    b->length += n;
    b->bytes[b->length] = 0;
}

/* One TCP connection: a follower reading an event stream, or a request connection. */
struct connection {
    int fd;
    int follower;        /* index of the follower, or -1 */
    int busy;            /* a request is in flight on it */
    double due;          /* when that request was due */
    int is_list;         /* its answer holds the run ids for details */
    struct buffer in;
    char tail[5];        /* a follower's last bytes, to find "\nid: " across reads */
    size_t tail_length;
};

/* Requests due and not yet sent, oldest first (a ring). */
struct pending { double due; int n; };
static struct pending queue[MAX_IN_FLIGHT];
static int queue_head = 0, queue_count = 0;

static long events[1024];
static double *latencies;
static long latency_count = 0, errors = 0, skipped = 0, busy_answers = 0, sent = 0;
static int active_requests = 0;  /* sent and not yet answered */
static char ids[MAX_IDS][ID_LEN];
static int id_count = 0;

static int epoll_fd, port;
static const char *token, *mix;

static int open_connection(void) {
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in address = {.sin_family = AF_INET, .sin_port = htons(port)};
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    if (connect(fd, (struct sockaddr *)&address, sizeof address) < 0 && errno != EINPROGRESS) {
        perror("connect");
        exit(1);
    }
    return fd;
}

static void watch(struct connection *c) {
    struct epoll_event e = {.events = EPOLLIN, .data.ptr = c};
    if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, c->fd, &e) < 0) { perror("epoll_ctl"); exit(1); }
}

/* Writes all of a short request; the socket buffer is empty when a request is sent, so a
 * blocking wait for writability (only while connecting) is enough. */
static void send_all(int fd, const char *text, size_t n) {
    while (n > 0) {
        ssize_t w = write(fd, text, n);
        if (w < 0 && (errno == EAGAIN || errno == EINTR)) {
            fd_set set;
            FD_ZERO(&set);
            FD_SET(fd, &set);
            select(fd + 1, NULL, &set, NULL, NULL);
            continue;
        }
        if (w < 0) { errors++; return; }
        text += w;
        n -= (size_t)w;
    }
}

static void send_get(int fd, const char *path) {
    char request[512];
    int n = snprintf(request, sizeof request, "GET %s HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer %s\r\n\r\n", path, token);
    send_all(fd, request, (size_t)n);
}

/* Which path request n asks for (as bench.py's caller did): in the full mix every other
 * request is a run detail of a run the last list showed. */
static const char *next_path(int n, char *detail) {
    if (strcmp(mix, "all") == 0) {
        if (id_count > 0 && n % 2) { snprintf(detail, 128, "/api/runs/%s", ids[n % id_count]); return detail; }
        return ALL_PATHS[n % 5];
    }
    if (strcmp(mix, "detail") == 0) {
        if (id_count > 0 && n % 50) { snprintf(detail, 128, "/api/runs/%s", ids[n % id_count]); return detail; }
        return LIST_PATH;
    }
    if (strcmp(mix, "list") == 0) return LIST_PATHS[n % 2];
    if (strcmp(mix, "small") == 0) return SMALL_PATHS[n % 2];
    if (strcmp(mix, "metrics") == 0) return METRICS_PATHS[0];
    return NULL;
}

static void read_ids(const char *body) {
    int count = 0;
    for (const char *p = strstr(body, "\"id\":\""); p && count < MAX_IDS; p = strstr(p, "\"id\":\"")) {
        p += 6;
        const char *end = strchr(p, '"');
        if (!end || end - p >= ID_LEN) break;
        memcpy(ids[count], p, (size_t)(end - p));
        ids[count][end - p] = 0;
        count++;
    }
    if (count > 0) id_count = count;
}

/* Whether c->in holds a whole answer; if so records it and consumes it. Answers other than
 * event streams carry Content-Length. */
static int take_answer(struct connection *c) {
    char *end = strstr(c->in.bytes, "\r\n\r\n");
    if (!end) return 0;
    size_t header_length = (size_t)(end + 4 - c->in.bytes);
    char *length_field = strcasestr(c->in.bytes, "\r\ncontent-length:");
    if (!length_field || length_field > end) { errors++; c->in.length = 0; c->busy = 0; active_requests--; return 1; }
    size_t body_length = strtoul(length_field + 17, NULL, 10);
    if (c->in.length < header_length + body_length) return 0;
    int status = atoi(c->in.bytes + 9);
    if (status == 503) busy_answers++;
    else if (status != 200) errors++;
    else if (c->is_list) {
        char saved = c->in.bytes[header_length + body_length];
        c->in.bytes[header_length + body_length] = 0;
        read_ids(c->in.bytes + header_length);
        c->in.bytes[header_length + body_length] = saved;
    }
    if (latency_count < MAX_LATENCIES) latencies[latency_count++] = now() - c->due;
    size_t rest = c->in.length - header_length - body_length;
    memmove(c->in.bytes, c->in.bytes + header_length + body_length, rest);
    c->in.length = rest;
    c->busy = 0;
    active_requests--;
    return 1;
}

static void count_events(struct connection *c, const char *data, size_t n) {
    /* "\nid: " in the tail of the last read followed by this one, then in this one alone. */
    char seam[16];
    size_t head = n < 4 ? n : 4;
    memcpy(seam, c->tail, c->tail_length);
    memcpy(seam + c->tail_length, data, head);
    if (memmem(seam, c->tail_length + head, "\nid: ", 5)) events[c->follower]++;
    for (const char *p = data; (p = memmem(p, n - (size_t)(p - data), "\nid: ", 5)); p += 5) events[c->follower]++;
    c->tail_length = n < 4 ? n : 4;
    memcpy(c->tail, data + n - c->tail_length, c->tail_length);
}

static struct connection *request_connections;
static int request_connection_count, per_request;

static void start(struct connection *c, struct pending p) {
    char detail[128];
    const char *path = next_path(p.n, detail);
    c->busy = 1;
    active_requests++;
    c->due = p.due;
    c->is_list = strcmp(path, LIST_PATH) == 0;
    send_get(c->fd, path);
}

/* Hands pending requests to idle connections (a new one each, with PER_REQUEST). */
static void dispatch(void) {
    while (queue_count > 0) {
        struct connection *idle = NULL;
        if (per_request) {
            idle = calloc(1, sizeof *idle);
            idle->fd = open_connection();
            idle->follower = -1;
            watch(idle);
        } else {
            for (int i = 0; i < request_connection_count && !idle; i++)
                if (!request_connections[i].busy) idle = &request_connections[i];
        }
        if (!idle) return;
        start(idle, queue[queue_head]);
        queue_head = (queue_head + 1) % MAX_IN_FLIGHT;
        queue_count--;
    }
}

static int in_flight(void) { return queue_count + active_requests; }

static void on_readable(struct connection *c) {
    char data[1 << 16];
    for (;;) {
        ssize_t n = read(c->fd, data, sizeof data);
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && errno == EAGAIN) return;
        if (n <= 0) {  /* closed: a follower ends; a request connection is reopened */
            epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
            close(c->fd);
            if (c->follower >= 0) { c->fd = -1; return; }
            if (c->busy) { errors++; active_requests--; }
            if (per_request) { free(c->in.bytes); free(c); return; }
            c->busy = 0;
            c->in.length = 0;
            c->fd = open_connection();
            watch(c);
            return;
        }
        if (c->follower >= 0) { count_events(c, data, (size_t)n); continue; }
        append(&c->in, data, (size_t)n);
        if (take_answer(c) && per_request) {
            epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
            close(c->fd);
            free(c->in.bytes);
            free(c);
            return;
        }
    }
}

static int compare(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

int main(int argc, char **argv) {
    if (argc != 8) {
        fprintf(stderr, "usage: loadgen PORT TOKEN MIX SSE_CLIENTS RATE CONNECTIONS PER_REQUEST\n");
        return 2;
    }
    port = atoi(argv[1]);
    token = argv[2];
    mix = argv[3];
    int followers = atoi(argv[4]);
    double rate = atof(argv[5]);
    request_connection_count = atoi(argv[6]);
    per_request = atoi(argv[7]);
    if (followers > 1024) followers = 1024;
    signal(SIGTERM, on_term);
    signal(SIGPIPE, SIG_IGN);
    latencies = malloc(sizeof(double) * MAX_LATENCIES);
    epoll_fd = epoll_create1(EPOLL_CLOEXEC);

    struct connection *follower_connections = calloc((size_t)followers + 1, sizeof *follower_connections);
    for (int i = 0; i < followers; i++) {
        struct connection *c = &follower_connections[i];
        c->fd = open_connection();
        c->follower = i;
        send_get(c->fd, "/api/events");
        watch(c);
    }
    int requests = strcmp(mix, "sse") != 0 && rate > 0;
    if (per_request) request_connection_count = 0;
    request_connections = calloc((size_t)request_connection_count + 1, sizeof *request_connections);
    for (int i = 0; requests && i < request_connection_count; i++) {
        request_connections[i].fd = open_connection();
        request_connections[i].follower = -1;
        watch(&request_connections[i]);
    }

    double begin = now(), interval = requests ? 1 / rate : 1;
    int n = 0;
    struct epoll_event ready[64];
    while (!stopping) {
        double t = now();
        while (requests && begin + n * interval <= t) {  /* every request now due */
            if (in_flight() >= MAX_IN_FLIGHT) skipped++;
            else {
                queue[(queue_head + queue_count) % MAX_IN_FLIGHT] = (struct pending){begin + n * interval, n};
                queue_count++;
                sent++;
            }
            n++;
        }
        dispatch();
        double wait = requests ? begin + n * interval - now() : 0.1;
        int timeout = wait > 0 ? (int)(wait * 1000) + 1 : 0;
        int count = epoll_wait(epoll_fd, ready, 64, timeout);
        for (int i = 0; i < count; i++) on_readable(ready[i].data.ptr);
    }
    double duration = now() - begin;

    qsort(latencies, (size_t)latency_count, sizeof(double), compare);
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    double cpu = usage.ru_utime.tv_sec + usage.ru_utime.tv_usec / 1e6 + usage.ru_stime.tv_sec + usage.ru_stime.tv_usec / 1e6;
    printf("{\"events\":[");
    for (int i = 0; i < followers; i++) printf("%s%ld", i ? "," : "", events[i]);
    printf("],\"latencies\":[");
    for (long i = 0; i < latency_count; i++) printf("%s%.6f", i ? "," : "", latencies[i]);
    printf("],\"errors\":%ld,\"skipped\":%ld,\"busy\":%ld,\"sent\":%ld,\"duration\":%.6f,\"cpu\":%.6f}\n",
           errors, skipped, busy_answers, sent, duration, cpu);
    return 0;
}
