/*
 * The bottom of the data plane: net loops (posted work in order, on the loop's thread; round-end
 * and exit hooks; a handler removed mid-round gets no more events), the blocking pool, and the
 * medium's common part (completion on the submitter's loop, range locks, access state).
 */
#include <check.h>
#include <pthread.h>
#include <stdatomic.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "tandem/medium.h"
#include "tandem/net.h"

static void sleep_ms(unsigned ms)
{
        struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
        nanosleep(&ts, NULL);
}

/* Waits (5 s at most) until *flag is set. */
static bool wait_flag(atomic_bool *flag)
{
        for (int i = 0; i < 5000 && !atomic_load(flag); i++)
                sleep_ms(1);
        return atomic_load(flag);
}

/* ---- posted work ---- */

#define N_POSTS 1000

struct counted_post {
        struct net_post post;
        int seq;
};

static struct net_loop *order_loop;
static int next_seen;
static atomic_int out_of_order, off_loop;
static atomic_bool posts_done;

static void counted_run(struct net_post *p)
{
        struct counted_post *c = (struct counted_post *)p;
        if (net_loop_current() != order_loop)
                atomic_fetch_add(&off_loop, 1);
        if (c->seq != next_seen)
                atomic_fetch_add(&out_of_order, 1);
        next_seen = c->seq + 1;
        if (c->seq == N_POSTS - 1)
                atomic_store(&posts_done, true);
}

START_TEST(posts_run_in_order_on_the_loop)
{
        static struct counted_post posts[N_POSTS];
        order_loop = net_loop_new("t-order");
        ck_assert_ptr_nonnull(order_loop);
        ck_assert_int_eq(net_loop_start(order_loop), 0);
        for (int i = 0; i < N_POSTS; i++) {
                posts[i] = (struct counted_post){.post.fn = counted_run, .seq = i};
                net_loop_post(order_loop, &posts[i].post);
        }
        ck_assert(wait_flag(&posts_done));
        ck_assert_int_eq(atomic_load(&out_of_order), 0);
        ck_assert_int_eq(atomic_load(&off_loop), 0);
        ck_assert_ptr_null(net_loop_current()); /* this thread runs no loop */
        net_loop_stop(order_loop);
}
END_TEST

/* ---- hooks ---- */

static atomic_int round_runs, exit_runs;
static atomic_bool hooks_set;

static void count_round(void *arg)
{
        (void)arg;
        atomic_fetch_add(&round_runs, 1);
}

static void count_exit(void *arg)
{
        (void)arg;
        atomic_fetch_add(&exit_runs, 1);
}

static void set_hooks(struct net_post *p)
{
        (void)p;
        struct net_loop *l = net_loop_current();
        /* The same hook twice in one round runs once. */
        net_loop_at_round_end(l, count_round, NULL);
        net_loop_at_round_end(l, count_round, NULL);
        net_loop_on_exit(l, count_exit, NULL);
        atomic_store(&hooks_set, true);
}

START_TEST(round_end_once_and_exit_hooks)
{
        struct net_loop *l = net_loop_new("t-hooks");
        ck_assert_int_eq(net_loop_start(l), 0);
        struct net_post p = {.fn = set_hooks};
        net_loop_post(l, &p);
        ck_assert(wait_flag(&hooks_set));
        sleep_ms(20);
        ck_assert_int_eq(atomic_load(&round_runs), 1);
        ck_assert_int_eq(atomic_load(&exit_runs), 0);
        net_loop_stop(l);
        ck_assert_int_eq(atomic_load(&exit_runs), 1);
}
END_TEST

/* ---- a handler removed while its events are in the same round ---- */

struct two_fds {
        struct net_handler a, b;
        struct net_loop *l;
        atomic_int a_calls, b_calls;
        atomic_bool armed;
};

static struct two_fds fds;

/* Whichever fires first removes the other: the other's event of this round must not run. */
static void first_removes_other(struct net_handler *h, uint32_t events)
{
        (void)events;
        struct net_handler *other = h == &fds.a ? &fds.b : &fds.a;
        atomic_fetch_add(h == &fds.a ? &fds.a_calls : &fds.b_calls, 1);
        net_loop_del(fds.l, h);
        net_loop_del(fds.l, other);
}

static void add_both(struct net_post *p)
{
        (void)p;
        ck_assert_int_eq(net_loop_add(fds.l, &fds.a, EPOLLIN), 0);
        ck_assert_int_eq(net_loop_add(fds.l, &fds.b, EPOLLIN), 0);
        atomic_store(&fds.armed, true);
}

START_TEST(removed_handler_gets_no_event_of_the_round)
{
        fds.a = (struct net_handler){.fd = eventfd(1, EFD_NONBLOCK), .fn = first_removes_other};
        fds.b = (struct net_handler){.fd = eventfd(1, EFD_NONBLOCK), .fn = first_removes_other};
        fds.l = net_loop_new("t-del");
        ck_assert_int_eq(net_loop_start(fds.l), 0);
        struct net_post p = {.fn = add_both};
        net_loop_post(fds.l, &p);
        ck_assert(wait_flag(&fds.armed));
        sleep_ms(50);
        /* Both were readable in the same round; exactly one handler ran, once. */
        ck_assert_int_eq(atomic_load(&fds.a_calls) + atomic_load(&fds.b_calls), 1);
        net_loop_stop(fds.l);
        close(fds.a.fd);
        close(fds.b.fd);
}
END_TEST

/* ---- the pool ---- */

struct pool_job {
        struct net_work work;
        pthread_t run_thread;
        struct net_loop *done_loop;
        atomic_bool done;
};

static void job_run(struct net_work *w)
{
        struct pool_job *j = (struct pool_job *)w;
        j->run_thread = pthread_self();
}

static void job_done(struct net_work *w)
{
        struct pool_job *j = (struct pool_job *)w;
        j->done_loop = net_loop_current();
        atomic_store(&j->done, true);
}

static struct pool_job loop_job;

static void submit_from_loop(struct net_post *p)
{
        (void)p;
        loop_job.work.run = job_run;
        loop_job.work.done = job_done;
        net_pool_submit(&loop_job.work);
}

START_TEST(pool_runs_elsewhere_and_completes_on_the_loop)
{
        struct net_loop *l = net_loop_new("t-pool");
        ck_assert_int_eq(net_loop_start(l), 0);
        struct net_post p = {.fn = submit_from_loop};
        net_loop_post(l, &p);
        ck_assert(wait_flag(&loop_job.done));
        ck_assert_ptr_eq(loop_job.done_loop, l);
        ck_assert(!pthread_equal(loop_job.run_thread, pthread_self()));
        net_loop_stop(l);
        /* From a thread with no loop, done runs on the pool thread. */
        struct pool_job j = {.work = {.run = job_run, .done = job_done}};
        net_pool_submit(&j.work);
        ck_assert(wait_flag(&j.done));
        ck_assert_ptr_null(j.done_loop);
}
END_TEST

/* ---- range locks ---- */

static const struct tdm_medium_ops no_ops;
static struct tdm_medium med;

static void med_setup(void)
{
        tdm_medium_init(&med, &no_ops, 1u << 30);
}

static void med_teardown(void)
{
        tdm_medium_fini(&med);
}

static atomic_int granted_count;

static void on_granted(struct tdm_range *r)
{
        (void)r;
        atomic_fetch_add(&granted_count, 1);
}

START_TEST(readers_share_writers_exclude)
{
        struct tdm_range r1 = {.off = 0, .len = 4096, .shared = true, .granted = on_granted};
        struct tdm_range r2 = {.off = 1024, .len = 4096, .shared = true, .granted = on_granted};
        struct tdm_range w = {.off = 2048, .len = 512, .granted = on_granted};
        struct tdm_range far = {.off = 1 << 20, .len = 512, .granted = on_granted};
        atomic_store(&granted_count, 0);
        ck_assert(tdm_range_lock(&med, &r1));
        ck_assert(tdm_range_lock(&med, &r2));
        ck_assert(!tdm_range_lock(&med, &w)); /* overlaps both readers */
        ck_assert(tdm_range_lock(&med, &far));
        tdm_range_unlock(&med, &r1);
        ck_assert_int_eq(atomic_load(&granted_count), 0); /* r2 still holds it off */
        tdm_range_unlock(&med, &r2);
        ck_assert_int_eq(atomic_load(&granted_count), 1); /* no loop here: granted inline */
        tdm_range_unlock(&med, &w);
        tdm_range_unlock(&med, &far);
        /* Touching ranges do not overlap; a zero length locks nothing. */
        struct tdm_range a = {.off = 0, .len = 512}, b = {.off = 512, .len = 512};
        struct tdm_range none = {.off = 0, .len = 0};
        ck_assert(tdm_range_lock(&med, &a));
        ck_assert(tdm_range_lock(&med, &b));
        ck_assert(tdm_range_lock(&med, &none));
        tdm_range_unlock(&med, &none);
        tdm_range_unlock(&med, &a);
        tdm_range_unlock(&med, &b);
}
END_TEST

/* A waiting writer is not overtaken by readers that come after it. */
START_TEST(waiters_are_served_in_order)
{
        struct tdm_range r1 = {.off = 0, .len = 4096, .shared = true, .granted = on_granted};
        struct tdm_range w = {.off = 0, .len = 4096, .granted = on_granted};
        struct tdm_range r2 = {.off = 0, .len = 4096, .shared = true, .granted = on_granted};
        atomic_store(&granted_count, 0);
        ck_assert(tdm_range_lock(&med, &r1));
        ck_assert(!tdm_range_lock(&med, &w));
        ck_assert(!tdm_range_lock(&med, &r2)); /* would share with r1, but w came first */
        tdm_range_unlock(&med, &r1);
        ck_assert_int_eq(atomic_load(&granted_count), 1); /* w */
        ck_assert(!w.waiting && r2.waiting);
        tdm_range_unlock(&med, &w);
        ck_assert_int_eq(atomic_load(&granted_count), 2);
        tdm_range_unlock(&med, &r2);
}
END_TEST

/* A lock that had to wait is granted on the loop that asked for it. */
struct loop_waiter {
        struct tdm_range range;
        struct net_loop *asked_on, *granted_on;
        atomic_bool asked, granted;
        struct net_post post;
};

static void waiter_granted(struct tdm_range *r)
{
        struct loop_waiter *w = r->arg;
        w->granted_on = net_loop_current();
        atomic_store(&w->granted, true);
}

static void waiter_ask(struct net_post *p)
{
        struct loop_waiter *w =
            (struct loop_waiter *)((char *)p - offsetof(struct loop_waiter, post));
        w->asked_on = net_loop_current();
        ck_assert(!tdm_range_lock(&med, &w->range));
        atomic_store(&w->asked, true);
}

START_TEST(grant_comes_back_on_the_asking_loop)
{
        struct net_loop *l = net_loop_new("t-range");
        ck_assert_int_eq(net_loop_start(l), 0);
        struct tdm_range held = {.off = 0, .len = 4096};
        tdm_range_lock_wait(&med, &held);
        static struct loop_waiter w;
        w = (struct loop_waiter){.range = {.off = 0, .len = 512, .granted = waiter_granted}};
        w.range.arg = &w;
        w.post.fn = waiter_ask;
        net_loop_post(l, &w.post);
        ck_assert(wait_flag(&w.asked));
        tdm_range_unlock(&med, &held); /* from this thread */
        ck_assert(wait_flag(&w.granted));
        ck_assert_ptr_eq(w.granted_on, l);
        ck_assert_ptr_eq(w.asked_on, l);
        tdm_range_unlock(&med, &w.range);
        net_loop_stop(l);
}
END_TEST

/* tdm_range_lock_wait blocks a loop-less thread until the range is free. */
static atomic_bool blocker_has_it;

static void *blocker(void *arg)
{
        (void)arg;
        struct tdm_range r = {.off = 100, .len = 100};
        tdm_range_lock_wait(&med, &r);
        atomic_store(&blocker_has_it, true);
        tdm_range_unlock(&med, &r);
        return NULL;
}

START_TEST(lock_wait_blocks_until_free)
{
        struct tdm_range held = {.off = 0, .len = 4096};
        tdm_range_lock_wait(&med, &held);
        pthread_t t;
        atomic_store(&blocker_has_it, false);
        ck_assert_int_eq(pthread_create(&t, NULL, blocker, NULL), 0);
        sleep_ms(50);
        ck_assert(!atomic_load(&blocker_has_it));
        tdm_range_unlock(&med, &held);
        pthread_join(t, NULL);
        ck_assert(atomic_load(&blocker_has_it));
}
END_TEST

/* ---- access state ---- */

static int access_calls;

static void access_changed(void *arg)
{
        (void)arg;
        access_calls++;
}

START_TEST(access_state_round_trip_and_change_callback)
{
        struct tdm_access a = tdm_medium_access(&med);
        ck_assert_int_eq(a.local_state, TDM_ACCESS_ACTIVE); /* a new medium serves */
        ck_assert_int_eq(a.peer_id, 0);
        med.access_changed = access_changed;
        access_calls = 0;
        struct tdm_access want = {.local_state = TDM_ACCESS_STANDBY,
                                  .local_id = 7,
                                  .peer_id = 0x1234,
                                  .peer_state = TDM_ACCESS_UNAVAILABLE};
        tdm_medium_set_access(&med, &want);
        tdm_medium_set_access(&med, &want); /* the same again: no second call */
        a = tdm_medium_access(&med);
        ck_assert_int_eq(a.local_state, TDM_ACCESS_STANDBY);
        ck_assert_int_eq(a.local_id, 7);
        ck_assert_int_eq(a.peer_id, 0x1234);
        ck_assert_int_eq(a.peer_state, TDM_ACCESS_UNAVAILABLE);
        ck_assert_int_eq(access_calls, 1);
        med.access_changed = NULL;
}
END_TEST

/* ---- completion on the submitter's loop ---- */

struct fake_submit {
        struct tdm_mio io;
        struct net_loop *done_on;
        atomic_bool done;
        struct net_post post;
};

static struct tdm_mio *pending_io;

/* A medium that completes later, from whichever thread calls complete_pending(). */
static void later_submit(struct tdm_medium *m, struct tdm_mio *io)
{
        (void)m;
        pending_io = io;
}

static const struct tdm_medium_ops later_ops = {.submit = later_submit};

static void fake_done(struct tdm_mio *io)
{
        struct fake_submit *f = io->arg;
        f->done_on = net_loop_current();
        atomic_store(&f->done, true);
}

static void fake_submit_on_loop(struct net_post *p)
{
        struct fake_submit *f =
            (struct fake_submit *)((char *)p - offsetof(struct fake_submit, post));
        tdm_medium_submit(&med, &f->io);
}

START_TEST(completion_runs_on_the_submitting_loop)
{
        med.ops = &later_ops;
        struct net_loop *l = net_loop_new("t-mio");
        ck_assert_int_eq(net_loop_start(l), 0);
        static struct fake_submit f;
        f = (struct fake_submit){.io = {.op = TDM_MIO_READ, .done = fake_done}};
        f.io.arg = &f;
        f.post.fn = fake_submit_on_loop;
        pending_io = NULL;
        net_loop_post(l, &f.post);
        for (int i = 0; i < 5000 && !pending_io; i++)
                sleep_ms(1);
        ck_assert_ptr_nonnull(pending_io);
        tdm_mio_complete(pending_io, -5); /* from this thread */
        ck_assert(wait_flag(&f.done));
        ck_assert_ptr_eq(f.done_on, l);
        ck_assert_int_eq(f.io.result, -5);
        net_loop_stop(l);
        med.ops = &no_ops;
}
END_TEST

int main(void)
{
        Suite *s = suite_create("medium");
        TCase *loops = tcase_create("net");
        tcase_add_test(loops, posts_run_in_order_on_the_loop);
        tcase_add_test(loops, round_end_once_and_exit_hooks);
        tcase_add_test(loops, removed_handler_gets_no_event_of_the_round);
        tcase_add_test(loops, pool_runs_elsewhere_and_completes_on_the_loop);
        suite_add_tcase(s, loops);
        TCase *m = tcase_create("medium");
        tcase_add_checked_fixture(m, med_setup, med_teardown);
        tcase_add_test(m, readers_share_writers_exclude);
        tcase_add_test(m, waiters_are_served_in_order);
        tcase_add_test(m, grant_comes_back_on_the_asking_loop);
        tcase_add_test(m, lock_wait_blocks_until_free);
        tcase_add_test(m, access_state_round_trip_and_change_callback);
        tcase_add_test(m, completion_runs_on_the_submitting_loop);
        suite_add_tcase(s, m);
        SRunner *sr = srunner_create(s);
        srunner_run_all(sr, CK_NORMAL);
        int failed = srunner_ntests_failed(sr);
        srunner_free(sr);
        return failed ? 1 : 0;
}
