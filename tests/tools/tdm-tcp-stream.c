/*
 * tdm-tcp-stream: what loopback TCP gives on this machine, the ceilings tests/bench/run
 * compares the targets with: what one stream carries (the 1 MiB sequential rows), and with
 * --pingpong how many request/response exchanges one connection makes at one in flight when
 * neither side does any work (the QD1 rows: a 48-byte command out, a 48-byte header and
 * 4 KiB of data back, as a 4 KiB READ).
 *
 * Usage: tdm-tcp-stream [--seconds S] [--bs BYTES] [--pingpong]
 * Prints: "tcp-stream: seconds=S bs=B bytes=N mbps=M"
 *     or: "tcp-pingpong: seconds=S reply=B exchanges=N per_s=R us=U requester_cpu_us=C
 *          responder_cpu_us=C" (the CPU each side's thread used per exchange, the kernel's
 *          work for its syscalls and wake-ups included)
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static size_t bs = 1 << 20;

static double now_s(void)
{
        struct timespec ts;
        clock_gettime(CLOCK_MONOTONIC, &ts);
        return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* The receiver reads and drops, as a target that lands data in a buffer does. */
static void *sink(void *arg)
{
        int fd = *(int *)arg;
        char *buf = malloc(bs);
        while (buf && read(fd, buf, bs) > 0)
                ;
        free(buf);
        close(fd);
        return NULL;
}

enum { PING_BYTES = 48, PONG_BYTES = 48 + 4096 };

static double thread_cpu_s(void)
{
        struct rusage ru;
        getrusage(RUSAGE_THREAD, &ru);
        return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
               (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static double responder_cpu_s;

static bool read_full(int fd, char *buf, size_t len)
{
        for (size_t got = 0; got < len;) {
                ssize_t n = read(fd, buf + got, len - got);
                if (n <= 0)
                        return false;
                got += (size_t)n;
        }
        return true;
}

/* The responder answers each request at once, as a target with nothing to do would. */
static void *responder(void *arg)
{
        int fd = *(int *)arg;
        char req[PING_BYTES];
        static char reply[PONG_BYTES];
        double start = thread_cpu_s();
        while (read_full(fd, req, sizeof(req)) && write(fd, reply, sizeof(reply)) == sizeof(reply))
                ;
        responder_cpu_s = thread_cpu_s() - start;
        close(fd);
        return NULL;
}

/* Exchanges one at a time for `seconds`; returns how many were made. */
static unsigned long long ping_pong(int fd, double seconds, double *took, double *cpu_s)
{
        static char req[PING_BYTES], reply[PONG_BYTES];
        unsigned long long n = 0;
        double start = now_s(), end = start + seconds, cpu_start = thread_cpu_s();
        while (now_s() < end && write(fd, req, sizeof(req)) == sizeof(req) &&
               read_full(fd, reply, sizeof(reply)))
                n++;
        *took = now_s() - start;
        *cpu_s = thread_cpu_s() - cpu_start;
        return n;
}

static unsigned long long stream(int fd, double seconds, double *took)
{
        char *buf = calloc(1, bs);
        unsigned long long bytes = 0;
        double start = now_s(), end = start + seconds;
        while (buf && now_s() < end) {
                ssize_t n = write(fd, buf, bs);
                if (n <= 0)
                        break;
                bytes += (unsigned long long)n;
        }
        *took = now_s() - start;
        free(buf);
        return bytes;
}

int main(int argc, char **argv)
{
        double seconds = 5;
        bool pingpong = false;
        static const struct option opts[] = {{"seconds", required_argument, NULL, 's'},
                                             {"bs", required_argument, NULL, 'b'},
                                             {"pingpong", no_argument, NULL, 'p'},
                                             {0}};
        int ch;
        while ((ch = getopt_long(argc, argv, "s:b:p", opts, NULL)) != -1) {
                if (ch == 's')
                        seconds = atof(optarg);
                else if (ch == 'b')
                        bs = (size_t)strtoul(optarg, NULL, 10);
                else if (ch == 'p')
                        pingpong = true;
                else
                        return 2;
        }
        if (seconds <= 0 || bs == 0) {
                fprintf(stderr, "tdm-tcp-stream: --seconds and --bs must be positive\n");
                return 2;
        }
        int lfd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
        socklen_t sl = sizeof(sa);
        if (lfd < 0 || bind(lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(lfd, 1) < 0 ||
            getsockname(lfd, (struct sockaddr *)&sa, &sl) < 0) {
                perror("tdm-tcp-stream: listen");
                return 1;
        }
        int cfd = socket(AF_INET, SOCK_STREAM, 0);
        if (cfd < 0 || connect(cfd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
                perror("tdm-tcp-stream: connect");
                return 1;
        }
        int afd = accept(lfd, NULL, NULL);
        /* iSCSI targets and initiators turn Nagle off; so does the ping-pong. */
        int one = 1;
        if (pingpong && afd >= 0 &&
            (setsockopt(cfd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0 ||
             setsockopt(afd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)) < 0)) {
                perror("tdm-tcp-stream: TCP_NODELAY");
                return 1;
        }
        pthread_t t;
        if (afd < 0 || pthread_create(&t, NULL, pingpong ? responder : sink, &afd) != 0) {
                perror("tdm-tcp-stream: accept");
                return 1;
        }
        double took, requester_cpu_s = 0;
        unsigned long long n = pingpong ? ping_pong(cfd, seconds, &took, &requester_cpu_s)
                                        : stream(cfd, seconds, &took);
        close(cfd);
        pthread_join(t, NULL);
        close(lfd);
        double per = n ? 1e6 / (double)n : 0; /* seconds to µs per exchange */
        if (pingpong)
                printf("tcp-pingpong: seconds=%.1f reply=%d exchanges=%llu per_s=%.0f us=%.1f "
                       "requester_cpu_us=%.1f responder_cpu_us=%.1f\n",
                       took, PONG_BYTES, n, (double)n / took, took * per, requester_cpu_s * per,
                       responder_cpu_s * per);
        else
                printf("tcp-stream: seconds=%.1f bs=%zu bytes=%llu mbps=%.1f\n", took, bs, n,
                       (double)n / took / 1e6);
        return n ? 0 : 1;
}
