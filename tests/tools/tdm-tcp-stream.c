/*
 * tdm-tcp-stream: what one TCP stream carries over loopback on this machine, the ceiling a
 * single iSCSI session's sequential transfer is compared with (tests/bench/run).
 *
 * Usage: tdm-tcp-stream [--seconds S] [--bs BYTES]
 * Prints: "tcp-stream: seconds=S bs=B bytes=N mbps=M"
 */
#include <arpa/inet.h>
#include <getopt.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
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

int main(int argc, char **argv)
{
        double seconds = 5;
        static const struct option opts[] = {
            {"seconds", required_argument, NULL, 's'}, {"bs", required_argument, NULL, 'b'}, {0}};
        int ch;
        while ((ch = getopt_long(argc, argv, "s:b:", opts, NULL)) != -1) {
                if (ch == 's')
                        seconds = atof(optarg);
                else if (ch == 'b')
                        bs = (size_t)strtoul(optarg, NULL, 10);
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
        pthread_t t;
        if (afd < 0 || pthread_create(&t, NULL, sink, &afd) != 0) {
                perror("tdm-tcp-stream: accept");
                return 1;
        }
        char *buf = calloc(1, bs);
        unsigned long long bytes = 0;
        double start = now_s(), end = start + seconds;
        while (buf && now_s() < end) {
                ssize_t n = write(cfd, buf, bs);
                if (n <= 0)
                        break;
                bytes += (unsigned long long)n;
        }
        double took = now_s() - start;
        close(cfd);
        pthread_join(t, NULL);
        close(lfd);
        free(buf);
        printf("tcp-stream: seconds=%.1f bs=%zu bytes=%llu mbps=%.1f\n", took, bs, bytes,
               (double)bytes / took / 1e6);
        return bytes ? 0 : 1;
}
