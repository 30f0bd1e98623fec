/*
 * Unit tests of the service manager notifications (daemon/base/sd_notify.c): datagrams to a
 * real AF_UNIX socket bound here (a path and an abstract name), with the sender's credentials
 * the way a manager reads them, and the watchdog's environment.
 */
#include <check.h>
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "tandem/sd_notify.h"

/* A datagram socket standing for the manager's, with SO_PASSCRED like systemd's. */
struct listener {
        int fd;
        char address[sizeof(((struct sockaddr_un *)0)->sun_path) + 1]; /* NOTIFY_SOCKET form */
        char dir[64];
};

static void listener_open(struct listener *l, bool abstract)
{
        struct sockaddr_un sa = {.sun_family = AF_UNIX};
        socklen_t len;
        l->fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
        ck_assert_int_ge(l->fd, 0);
        int one = 1;
        ck_assert_int_eq(setsockopt(l->fd, SOL_SOCKET, SO_PASSCRED, &one, sizeof(one)), 0);
        l->dir[0] = '\0';
        if (abstract) {
                snprintf(l->address, sizeof(l->address), "@tandem-test-notify-%d", (int)getpid());
                size_t n = strlen(l->address);
                memcpy(sa.sun_path + 1, l->address + 1, n - 1);
                len = (socklen_t)(offsetof(struct sockaddr_un, sun_path) + n);
        } else {
                snprintf(l->dir, sizeof(l->dir), "/tmp/tandem-notify.XXXXXX");
                ck_assert_ptr_nonnull(mkdtemp(l->dir));
                snprintf(l->address, sizeof(l->address), "%s/notify", l->dir);
                ck_assert_uint_lt(strlen(l->address), sizeof(sa.sun_path));
                memcpy(sa.sun_path, l->address, strlen(l->address) + 1);
                len = sizeof(sa);
        }
        ck_assert_int_eq(bind(l->fd, (struct sockaddr *)&sa, len), 0);
}

static void listener_close(struct listener *l)
{
        close(l->fd);
        if (l->dir[0]) {
                unlink(l->address);
                rmdir(l->dir);
        }
}

/* One datagram (NUL-terminated into buf) and the sender's pid; -1 when none came in 1 s. */
static ssize_t listener_recv(struct listener *l, char *buf, size_t size, pid_t *sender)
{
        struct pollfd p = {.fd = l->fd, .events = POLLIN};
        if (poll(&p, 1, 1000) != 1)
                return -1;
        union {
                struct cmsghdr align;
                char buf[CMSG_SPACE(sizeof(struct ucred))];
        } control;
        struct iovec iov = {.iov_base = buf, .iov_len = size - 1};
        struct msghdr msg = {.msg_iov = &iov,
                             .msg_iovlen = 1,
                             .msg_control = control.buf,
                             .msg_controllen = sizeof(control.buf)};
        ssize_t n = recvmsg(l->fd, &msg, MSG_DONTWAIT);
        if (n < 0)
                return -1;
        buf[n] = '\0';
        *sender = -1;
        for (struct cmsghdr *c = CMSG_FIRSTHDR(&msg); c; c = CMSG_NXTHDR(&msg, c))
                if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_CREDENTIALS) {
                        struct ucred cred;
                        memcpy(&cred, CMSG_DATA(c), sizeof(cred));
                        *sender = cred.pid;
                }
        return n;
}

static void check_delivery(bool abstract)
{
        struct listener l;
        char buf[2048];
        pid_t sender;
        listener_open(&l, abstract);

        ck_assert_int_eq(tdm_sd_notify_to(l.address, "READY=1\nSTATUS=serving"), 1);
        ck_assert_int_eq(listener_recv(&l, buf, sizeof(buf), &sender), 22);
        ck_assert_str_eq(buf, "READY=1\nSTATUS=serving");
        ck_assert_int_eq(sender, getpid());

        /* Through the environment, and formatted. */
        ck_assert_int_eq(setenv("NOTIFY_SOCKET", l.address, 1), 0);
        ck_assert_int_eq(tdm_sd_notify("WATCHDOG=1"), 1);
        ck_assert_int_gt(listener_recv(&l, buf, sizeof(buf), &sender), 0);
        ck_assert_str_eq(buf, "WATCHDOG=1");
        ck_assert_int_eq(tdm_sd_notifyf("STOPPING=1\nSTATUS=%s %d", "stopping, signal", 15), 1);
        ck_assert_int_gt(listener_recv(&l, buf, sizeof(buf), &sender), 0);
        ck_assert_str_eq(buf, "STOPPING=1\nSTATUS=stopping, signal 15");

        /* Too long for one message: refused whole, nothing half sent. */
        char big[1100];
        memset(big, 'x', sizeof(big) - 1);
        big[sizeof(big) - 1] = '\0';
        ck_assert_int_eq(tdm_sd_notifyf("STATUS=%s", big), -EMSGSIZE);
        ck_assert_int_eq(listener_recv(&l, buf, sizeof(buf), &sender), -1);
        unsetenv("NOTIFY_SOCKET");
        listener_close(&l);
}

START_TEST(test_path_socket)
{
        check_delivery(false);
}
END_TEST

START_TEST(test_abstract_socket)
{
        check_delivery(true);
}
END_TEST

START_TEST(test_no_manager)
{
        unsetenv("NOTIFY_SOCKET");
        ck_assert_int_eq(tdm_sd_notify("READY=1"), 0);
        ck_assert_int_eq(tdm_sd_notifyf("STATUS=%d", 1), 0);
        ck_assert_int_eq(tdm_sd_notify_to(NULL, "READY=1"), 0);
        ck_assert_int_eq(tdm_sd_notify_to("", "READY=1"), 0);
}
END_TEST

START_TEST(test_bad_addresses)
{
        ck_assert_int_eq(tdm_sd_notify_to("relative/path", "READY=1"), -EINVAL);
        ck_assert_int_eq(tdm_sd_notify_to("@", "READY=1"), -EINVAL);
        ck_assert_int_eq(tdm_sd_notify_to("vsock:2:1234", "READY=1"), -EINVAL);
        char longpath[200] = "/";
        memset(longpath + 1, 'a', sizeof(longpath) - 2);
        longpath[sizeof(longpath) - 1] = '\0';
        ck_assert_int_eq(tdm_sd_notify_to(longpath, "READY=1"), -EINVAL);
        longpath[0] = '@';
        ck_assert_int_eq(tdm_sd_notify_to(longpath, "READY=1"), -EINVAL);
        /* Well-formed but nobody listens: the error of sendto(), not a silent success. */
        ck_assert_int_eq(tdm_sd_notify_to("/nonexistent-dir-tandem/notify", "READY=1"), -ENOENT);
}
END_TEST

START_TEST(test_watchdog_values)
{
        uint64_t usec = 0;
        ck_assert_int_eq(tdm_sd_watchdog_parse(NULL, NULL, 42, &usec), 0);
        ck_assert_int_eq(tdm_sd_watchdog_parse("", NULL, 42, &usec), 0);
        ck_assert_int_eq(tdm_sd_watchdog_parse("20000000", NULL, 42, &usec), 1);
        ck_assert_uint_eq(usec, 20000000);
        usec = 0;
        ck_assert_int_eq(tdm_sd_watchdog_parse("3000000", "42", 42, &usec), 1);
        ck_assert_uint_eq(usec, 3000000);
        ck_assert_int_eq(tdm_sd_watchdog_parse("3000000", "", 42, &usec), 1);
        /* Meant for another process (a parent that forked us, say). */
        usec = 7;
        ck_assert_int_eq(tdm_sd_watchdog_parse("3000000", "43", 42, &usec), 0);
        ck_assert_uint_eq(usec, 7);
        static const char *const bad[] = {
            "0", "-5", "+5", " 5", "5s", "abc", "99999999999999999999999"};
        for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
                ck_assert_msg(tdm_sd_watchdog_parse(bad[i], NULL, 42, &usec) == -EINVAL,
                              "accepted WATCHDOG_USEC=\"%s\"", bad[i]);
        ck_assert_int_eq(tdm_sd_watchdog_parse("1000", "x1", 42, &usec), -EINVAL);
        ck_assert_int_eq(tdm_sd_watchdog_parse("1000", "0", 42, &usec), -EINVAL);
}
END_TEST

START_TEST(test_watchdog_environment)
{
        uint64_t usec = 0;
        char pid[32];
        unsetenv("WATCHDOG_USEC");
        unsetenv("WATCHDOG_PID");
        ck_assert_int_eq(tdm_sd_watchdog_enabled(&usec), 0);
        setenv("WATCHDOG_USEC", "4000000", 1);
        ck_assert_int_eq(tdm_sd_watchdog_enabled(&usec), 1);
        ck_assert_uint_eq(usec, 4000000);
        snprintf(pid, sizeof(pid), "%d", (int)getpid());
        setenv("WATCHDOG_PID", pid, 1);
        ck_assert_int_eq(tdm_sd_watchdog_enabled(&usec), 1);
        snprintf(pid, sizeof(pid), "%d", (int)getpid() + 1);
        setenv("WATCHDOG_PID", pid, 1);
        ck_assert_int_eq(tdm_sd_watchdog_enabled(&usec), 0);
        unsetenv("WATCHDOG_USEC");
        unsetenv("WATCHDOG_PID");
}
END_TEST

static Suite *sd_notify_suite(void)
{
        Suite *s = suite_create("sd_notify");
        TCase *tc = tcase_create("notify");
        tcase_add_test(tc, test_path_socket);
        tcase_add_test(tc, test_abstract_socket);
        tcase_add_test(tc, test_no_manager);
        tcase_add_test(tc, test_bad_addresses);
        tcase_add_test(tc, test_watchdog_values);
        tcase_add_test(tc, test_watchdog_environment);
        suite_add_tcase(s, tc);
        return s;
}

int main(void)
{
        SRunner *sr = srunner_create(sd_notify_suite());
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
