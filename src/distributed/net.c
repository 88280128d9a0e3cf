/* Sockets with deadlines, for the store and the tcp backend. */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "distributed/dist_internal.h"

int64_t ct_dist_now_ms(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void ct_dist_sleep_ms(int64_t ms) {
    struct timespec ts = {(time_t)(ms / 1000), (long)(ms % 1000) * 1000000L};
    while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
    }
}

static void set_nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

int ct_dist_listen(const char *host, int port, int *port_out) {
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    if (getaddrinfo(host, ps, &hints, &res) != 0 || !res) {
        errno = EADDRNOTAVAIL;
        return -1;
    }
    int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) {
        freeaddrinfo(res);
        return -1;
    }
    int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, res->ai_addr, res->ai_addrlen) != 0 || listen(fd, 128) != 0) {
        int e = errno;
        freeaddrinfo(res);
        close(fd);
        errno = e;
        return -1;
    }
    freeaddrinfo(res);
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    getsockname(fd, (struct sockaddr *)&sa, &len);
    if (port_out)
        *port_out = ntohs(sa.sin_port);
    return fd;
}

int ct_dist_connect(const char *op, const char *host, int port, int64_t deadline_ms) {
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_INET;
    hints.ai_socktype = SOCK_STREAM;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", port);
    int gai = getaddrinfo(host, ps, &hints, &res);
    if (gai != 0 || !res) {
        ct_error(CT_ERROR_RUNTIME, op, "cannot resolve host '%s': %s", host, gai_strerror(gai));
        return -1;
    }
    int64_t wait = 10;
    int last = 0;
    for (;;) {
        int fd = socket(res->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
        if (fd < 0) {
            last = errno;
            break;
        }
        if (connect(fd, res->ai_addr, res->ai_addrlen) == 0) {
            freeaddrinfo(res);
            set_nodelay(fd);
            return fd;
        }
        last = errno;
        close(fd);
        if (last != ECONNREFUSED && last != ENETUNREACH && last != EHOSTUNREACH && last != ETIMEDOUT &&
            last != EAGAIN && last != EINTR)
            break;
        if (ct_dist_now_ms() >= deadline_ms)
            break;
        ct_dist_sleep_ms(wait);
        if (wait < 200)
            wait *= 2;
    }
    freeaddrinfo(res);
    ct_error(CT_ERROR_RUNTIME, op, "could not connect to %s:%d: %s", host, port, strerror(last));
    return -1;
}

/* Waits for events on fd until deadline (-1: forever); 1 ready, 0 timeout. */
static int wait_fd(int fd, short events, int64_t deadline_ms) {
    for (;;) {
        int t = -1;
        if (deadline_ms >= 0) {
            int64_t left = deadline_ms - ct_dist_now_ms();
            if (left <= 0)
                return 0;
            t = left > 1000000 ? 1000000 : (int)left;
        }
        struct pollfd p = {fd, events, 0};
        int r = poll(&p, 1, t);
        if (r > 0)
            return 1;
        if (r < 0 && errno != EINTR)
            return 1; /* let the read or write report it */
    }
}

int ct_dist_accept(int fd, int64_t deadline_ms) {
    if (!wait_fd(fd, POLLIN, deadline_ms)) {
        errno = ETIMEDOUT;
        return -1;
    }
    int c = accept(fd, NULL, NULL);
    if (c >= 0) {
        fcntl(c, F_SETFD, FD_CLOEXEC);
        set_nodelay(c);
    }
    return c;
}

int ct_dist_send_all(int fd, const void *buf, size_t n, int64_t deadline_ms) {
    const char *p = buf;
    while (n > 0) {
        if (!wait_fd(fd, POLLOUT, deadline_ms)) {
            errno = ETIMEDOUT;
            return -1;
        }
        ssize_t k = send(fd, p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
        if (k < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            if (errno == EPIPE)
                errno = ECONNRESET;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

int ct_dist_recv_all(int fd, void *buf, size_t n, int64_t deadline_ms) {
    char *p = buf;
    while (n > 0) {
        if (!wait_fd(fd, POLLIN, deadline_ms)) {
            errno = ETIMEDOUT;
            return -1;
        }
        ssize_t k = recv(fd, p, n, MSG_DONTWAIT);
        if (k == 0) {
            errno = ECONNRESET;
            return -1;
        }
        if (k < 0) {
            if (errno == EINTR || errno == EAGAIN || errno == EWOULDBLOCK)
                continue;
            return -1;
        }
        p += k;
        n -= (size_t)k;
    }
    return 0;
}

int ct_dist_local_addr(int fd, char *buf, size_t cap) {
    struct sockaddr_in sa;
    socklen_t len = sizeof sa;
    if (getsockname(fd, (struct sockaddr *)&sa, &len) != 0 || sa.sin_family != AF_INET)
        return -1;
    return inet_ntop(AF_INET, &sa.sin_addr, buf, (socklen_t)cap) ? 0 : -1;
}
